"""The one boundary between the web app and the model: ``app/`` imports the model through
``model/api.py`` only, never holds a ``torch.nn.Module`` and never hooks a layer (a call the app
no longer wants stops through the decoding loop's ``should_stop``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP_FILES = sorted((ROOT / "app").rglob("*.py"))
BOUNDARY = "model.api"
HOOKS = {"register_forward_pre_hook", "register_forward_hook", "register_full_backward_hook",
         "register_full_backward_pre_hook", "register_backward_hook", "register_module_forward_hook",
         "register_module_forward_pre_hook"}
# attributes that hand out a model's modules: a translator's or a timeline's ``model``
MODULE_HOLDERS = ("translator", "timeline")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(tree: ast.Module) -> list[tuple[int, str, list[str]]]:
    """Every import in the file (lazy ones and ``TYPE_CHECKING`` ones too): line, module, names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
    return found


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_there_are_app_files_to_check():
    assert len(APP_FILES) > 20 and any(p.name == "engine.py" for p in APP_FILES)


def test_the_app_imports_the_model_through_one_module():
    import model.api

    exported = set(model.api.__all__)
    wrong, unknown = [], []
    for path in APP_FILES:
        for line, module, names in _imports(_tree(path)):
            if module == "model" or module.startswith("model."):
                if module != BOUNDARY:
                    wrong.append(f"{_where(path, line)} imports {module}")
                unknown += [f"{_where(path, line)} {name}" for name in names if name not in exported]
    assert not wrong, "app/ imports the model only through model/api.py:\n" + "\n".join(wrong)
    assert not unknown, "names model/api.py does not export:\n" + "\n".join(unknown)


def test_the_app_never_touches_torch_nn_or_a_layer_hook():
    found = []
    for path in APP_FILES:
        tree = _tree(path)
        for line, module, names in _imports(tree):
            if module == "torch.nn" or module.startswith("torch.nn.") or (
                    module == "torch" and "nn" in names):
                found.append(f"{_where(path, line)} imports torch.nn")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                text = ast.unparse(node)
                if node.attr in HOOKS or text.endswith(("nn.Module", "torch.nn")):
                    found.append(f"{_where(path, node.lineno)} {text}")
                elif node.attr == "model" and ast.unparse(node.value).endswith(MODULE_HOLDERS):
                    found.append(f"{_where(path, node.lineno)} {text} (a module, not plain data)")
            elif isinstance(node, ast.Name) and node.id in HOOKS:
                found.append(f"{_where(path, node.lineno)} {node.id}")
    assert not found, "app/ holds no nn.Module and hooks no layer:\n" + "\n".join(found)


def test_the_boundary_hands_out_no_module():
    """What model/api.py exports is functions, data classes and constants: no nn.Module class or
    instance passes through it."""
    import torch

    import model.api

    for name in model.api.__all__:
        value = getattr(model.api, name)
        assert not isinstance(value, torch.nn.Module), name
        assert not (isinstance(value, type) and issubclass(value, torch.nn.Module)), name


@pytest.mark.parametrize("source", [
    "from model.translator import Translator\n",
    "def f():\n    import model.decoding\n",
    "def f(translator):\n    return translator.model.encoder_layers\n",
    "def f(layer, hook):\n    layer.register_forward_pre_hook(hook)\n",
    "from torch import nn\n",
])
def test_the_checks_catch_a_crossing(tmp_path, monkeypatch, source):
    """Each kind of crossing, written into an app file, fails one of the checks above."""
    path = ROOT / "app" / "crossing.py"
    monkeypatch.setattr(f"{__name__}.APP_FILES", [path])
    monkeypatch.setattr(f"{__name__}._tree", lambda _: ast.parse(source))
    checks = (test_the_app_imports_the_model_through_one_module,
              test_the_app_never_touches_torch_nn_or_a_layer_hook)
    failed = 0
    for check in checks:
        try:
            check()
        except AssertionError:
            failed += 1
    assert failed == 1
