"""What the method tests share: self-drafting's adaptive settings, and the models each row of the
method table needs, loaded as main.py loads them."""
from picospec.methods import defaults
from picospec_app.load import load_needs

# gamma moves a lot
ADAPTIVE = dict(threshold=0.5, adaptive=True, alpha=0.8, epsilon=0.2, beta1=0.5, beta2=0.5)


def needs_of(method, models):
    loaded, heads, _ = models
    out = {"target": loaded["target"]}
    for need in method.needs:
        # loaded as main.py loads them (cascade, self-drafting)
        if need == "draft2" or need.startswith("self_draft:"):
            out.update(load_needs(method._replace(needs=(need,)), defaults(method), out["target"],
                                  "tiny-target", None))
            continue
        if need == "acceptance":  # Sequoia's vectors, measured for the built-in pair
            out.update(load_needs(method._replace(needs=(need,)), defaults(method), out["target"],
                                  "tiny-target", None))
            continue
        out.update({"draft": {"draft": loaded["draft"]},
                    "datastore": {"datastore": loaded["datastore"]}}.get(need)
                   or {"heads": heads[need.split(":")[1]]})
    return out
