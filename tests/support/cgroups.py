"""Fake cgroup trees for the readers of CPU quotas and memory limits."""


def cgroup_tree(tmp_path, lines, files):
    """A fake /proc/self/cgroup of `lines` and a cgroup mount holding `files` {path: text}."""
    proc, mount = tmp_path / "cgroup", tmp_path / "mount"
    proc.write_text("".join(f"{line}\n" for line in lines))
    for path, text in files.items():
        (mount / path).parent.mkdir(parents=True, exist_ok=True)
        (mount / path).write_text(text)
    return str(proc), str(mount)
