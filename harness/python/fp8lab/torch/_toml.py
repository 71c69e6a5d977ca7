"""A recipe built in Python as a dict in the shape of a recipe file (experiments/recipes/*.toml),
written out as TOML text for the one recipe reader (harness/recipes/recipe_toml.hpp): strings,
booleans, integers, tables and arrays of tables, which is all a recipe holds."""


def _value(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x, f'{where}.{k}')}" for k, x in v.items()) + " }"
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
            lines.append(f"{key} = {_value(v, key)}")
    for key, v in tables:
        entries = v if isinstance(v, list) else [v]
        for i, entry in enumerate(entries):
            lines.append("")
            lines.append(f"[[{key}]]" if isinstance(v, list) else f"[{key}]")
            for k, x in entry.items():
                lines.append(f"{k} = {_value(x, f'{key}[{i}].{k}' if isinstance(v, list) else f'{key}.{k}')}")
    return "\n".join(lines) + "\n"
