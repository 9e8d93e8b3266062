"""The heads' trainers and the batched generator under --device gpu give what they give on the CPU:
the same greedy self-distilled tokens, heads (Medusa), EAGLE and EAGLE-3 heads equal within float32
rounding after a few steps, the same files. Runs only where CuPy and a GPU are present; elsewhere
skipped, and says why."""
import json

import numpy as np
import pytest

from gpt2.backend import to_device
from gpt2.engine import tree_map
from gpt2.train.generate import generate_batch
from gpt2.weights import read_safetensors, save_checkpoint

cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the GPU trainers cannot run here")
try:
    cupy.cuda.runtime.getDeviceCount()
except Exception as e:  # noqa: BLE001 - any CUDA failure means no GPU to test on
    pytest.skip(f"no usable GPU ({e})", allow_module_level=True)

HP = {"n_vocab": 50, "n_ctx": 160, "n_embd": 32, "n_head": 2, "n_layer": 2}


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    """A random GPT-2 (float32 checkpoint) whose greedy text varies, and a data folder of 60,000
    random tokens."""
    from gpt2.train.gpt2 import init_params

    root = tmp_path_factory.mktemp("gpu")
    params = init_params(HP, np.random.default_rng(0))
    params = tree_map(lambda a: (a * 15).astype(np.float32) if a.ndim == 2 else a, params)
    # (every matrix x 15: at the usual 0.02 scale a random GPT-2 repeats one token; here greedy rows
    # vary)
    save_checkpoint(root / "model", HP, params, dtype="float32")
    # EAGLE-3 reads three depths: the same with a third block
    hp3 = {**HP, "n_layer": 3}
    deeper = {**params, "blocks": params["blocks"] + params["blocks"][:1]}
    save_checkpoint(root / "model3", hp3, deeper, dtype="float32")
    (root / "data").mkdir()
    tokens = np.random.default_rng(1).integers(0, HP["n_vocab"], 60_000).astype(np.uint16)
    tokens.tofile(root / "data" / "train.bin")
    tokens[:8000].tofile(root / "data" / "val.bin")
    (root / "data" / "meta.json").write_text(json.dumps({"n_vocab": HP["n_vocab"]}))
    return root, params


def test_generate_batch_on_gpu_writes_the_cpu_tokens(backbone):
    _, params = backbone
    prompts = np.random.default_rng(2).integers(0, HP["n_vocab"], (8, 16))
    for temperature in (0.0, 1.0):
        cpu = generate_batch(HP, params, prompts, 40, np.random.default_rng(3), temperature)
        gpu = generate_batch(HP, to_device(params, cupy), prompts, 40, np.random.default_rng(3),
                             temperature)
        assert isinstance(gpu, np.ndarray) and gpu.shape == cpu.shape == (8, 56)
        assert (gpu == cpu).mean() > 0.99, temperature  # float rounding may flip a rare near-tie


@pytest.mark.parametrize("trainer", ["medusa", "eagle", "eagle3"])
def test_trainer_on_gpu_matches_the_cpu(backbone, trainer):
    root, _ = backbone
    model = "model3" if trainer == "eagle3" else "model"
    if trainer == "medusa":
        from gpt2.train.heads import main
        kw = dict(n_heads=2, n_ctx=32, batch_size=4, max_steps=6, eval_every=3, distill_tokens=3000,
                  distill_temperature=0.0, dtype="float32")
        name, prefix = "heads.safetensors", "heads."
    elif trainer == "eagle":
        from gpt2.train.eagle import main
        kw = dict(distill_tokens=1000, batch_size=2, max_steps=6, eval_every=3, eval_rows=2,
                  steps=2, dtype="float32")
        name, prefix = "eagle.safetensors", "eagle."
    else:
        from gpt2.train.eagle3 import main
        kw = dict(distill_tokens=1000, draft_vocab=20, test_steps=2, batch_size=2, max_steps=6,
                  eval_every=3, eval_rows=2, steps=2, dtype="float32")
        name, prefix = "eagle3.safetensors", "eagle3."
    for device in ("cpu", "gpu"):
        main(backbone=str(root / model), data=str(root / "data"),
             out=str(root / f"{trainer}-{device}"), device=device, **kw)
    cpu = read_safetensors(root / f"{trainer}-cpu" / name)
    gpu = read_safetensors(root / f"{trainer}-gpu" / name)
    assert cpu.keys() == gpu.keys() and any(k.startswith(prefix) for k in cpu)
    distilled = [(root / f"{trainer}-{device}" / "distill.bin").read_bytes()
                 for device in ("cpu", "gpu")]
    assert distilled[0] == distilled[1]  # the greedy rows both devices wrote
    for k in cpu:
        np.testing.assert_allclose(gpu[k], cpu[k], rtol=1e-3, atol=1e-4, err_msg=k)
