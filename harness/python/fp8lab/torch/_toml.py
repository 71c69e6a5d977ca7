"""A recipe built in Python as a dict in the shape of a recipe file (experiments/recipes/*.toml),
written out as TOML text for the one recipe reader (harness/recipes/recipe_toml.hpp): strings,
booleans, integers, tables and arrays of tables, which is all a recipe holds. Keys are quoted and strings escaped as JSON does (TOML takes both)."""
import json


def _key(k):
    """A key, quoted: whatever its characters, one key (never a dotted path or a comment)."""
    if not isinstance(k, str):
        raise TypeError(f"recipe keys are strings, got {k!r}")
    return json.dumps(k)


def _value(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: JSON's escapes are TOML's (control characters included)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x, f'{where}.{k}')}" for k, x in v.items()) + " }"
    raise TypeError(f"recipe field '{where}': {type(v).__name__} is not a value a recipe holds "
                    "(str, bool, int, or a table)")


def dumps(recipe):
    """TOML text of a recipe dict: top-level values first, then [tables], then [[override]] entries."""
    if not isinstance(recipe, dict):
        raise TypeError(f"a recipe dict is needed, got {type(recipe).__name__}")
    lines, tables = [], []
    for key, v in recipe.items():
        if isinstance(v, dict):
            tables.append((key, v))
        elif isinstance(v, (list, tuple)):
            if not all(isinstance(entry, dict) for entry in v):
                raise TypeError(f"recipe field '{key}': a list must hold tables (as [[override]] does)")
            tables.append((key, list(v)))
        else:
            lines.append(f"{_key(key)} = {_value(v, key)}")
    for key, v in tables:
        entries = v if isinstance(v, list) else [v]
        for i, entry in enumerate(entries):
            lines.append("")
            lines.append(f"[[{_key(key)}]]" if isinstance(v, list) else f"[{_key(key)}]")
            for k, x in entry.items():
                lines.append(f"{_key(k)} = {_value(x, f'{key}[{i}].{k}' if isinstance(v, list) else f'{key}.{k}')}")
    return "\n".join(lines) + "\n"
