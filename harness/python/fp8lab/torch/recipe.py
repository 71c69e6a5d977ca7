"""Precision recipes for fp8lab.torch: the names and files `fp8lab train --recipe` accepts, with
the same meaning (one C++ reader, harness/recipes/recipe_catalog.hpp), or a recipe built in
Python as a dict in a recipe file's shape."""
import os

from .. import _core
from . import _toml


class Recipe:
    """A precision recipe: how a linear layer's Fprop, Dgrad and Wgrad are computed.

    Recipe("deepseek_v3")                 a built-in or shipped name (fp8lab.recipes() lists them)
    Recipe("path/to/my_recipe.toml")      a recipe file (relative paths against base, default the cwd)
    Recipe({"name": "mine", "gemm": {"kind": "fp8", "promotion": "32"},
            "override": [{"layer": "output", "gemm": {"kind": "bf16"}}]})
                                          a dict in a recipe file's shape (experiments/README.md)
    Recipe.from_toml(text)                TOML text

    Overrides name layers by their module names ('*' matches any characters, e.g. "*.wo",
    "layers.*.attention.wq"); fp8lab.torch.convert checks each names at least one converted layer.
    """

    def __init__(self, source, *, base=None):
        if isinstance(source, Recipe):
            self._text, self._toml, self._label, self._base = source._text, source._toml, source._label, source._base
        elif isinstance(source, dict):
            self._text, self._toml, self._label, self._base = None, _toml.dumps(source), "<recipe dict>", None
        elif isinstance(source, (str, os.PathLike)):
            text = os.fspath(source)
            if not text:
                raise ValueError("recipe: an empty name (fp8lab.recipes() lists the names)")
            self._text, self._toml, self._label = text, None, text
            self._base = os.fspath(base) if base is not None else os.getcwd()
        else:
            raise TypeError(f"recipe: a name, a .toml path, a dict or a Recipe, not {type(source).__name__}")
        self._recipe = self.resolve([])  # refused here, with the file, line and field, when it has an error

    @classmethod
    def from_toml(cls, text, label="<recipe text>"):
        r = cls.__new__(cls)
        r._text, r._toml, r._label, r._base = None, text, label, None
        r._recipe = r.resolve([])
        return r

    def resolve(self, layers):
        """The C++ recipe with its overrides checked against these layer names (none: unchecked)."""
        names = list(layers)
        if self._toml is not None:
            return _core._parse_recipe(self._toml, self._label, names)
        return _core._resolve_recipe(self._text, self._base, names)

    @property
    def name(self):
        return self._recipe.name

    @property
    def description(self):
        return self._recipe.description

    def gemms(self, layer=""):
        """{'fprop': ..., 'dgrad': ..., 'wgrad': ...}: what each GEMM of that layer computes."""
        plan = self._recipe.layer(layer)
        return {g: plan.describe(g) for g in ("fprop", "dgrad", "wgrad")}

    def __repr__(self):
        return f"Recipe({self._label!r}: {self.name})"

    def __reduce__(self):  # pickled and copied by its source, resolved again where it is loaded
        return (_rebuild, (self._text, self._toml, self._label, self._base))


def _rebuild(text, toml, label, base):
    if toml is not None:
        return Recipe.from_toml(toml, label)
    return Recipe(text, base=base)


def as_recipe(recipe):
    return recipe if isinstance(recipe, Recipe) else Recipe(recipe)
