"""The recompute study's plotting pieces (notebooks/recompute.ipynb): the published and claimed
memory/compute trade-offs it draws as reference marks, and one style per policy family."""
import pathlib

# Published / claimed memory-compute trade-offs, as (recompute FLOPs fraction, fraction of
# activation memory saved) where both are stated. Megatron's is FACTS.md's; the other two are
# claims made for recomputation, placed as stated: FACTS.md records no source for them (said so
# in captions).
MEGATRON_SELECTIVE = {"x": 0.027, "y": 0.70, "label": "Megatron selective (GPT-3): 70% saved for 2.7% FLOPs"}
MEGATRON_CITATION = ("Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models "
                     "(FACTS.md): GPT-3 selective recompute saves 70% of activation memory for 2.7% more FLOPs")
CHECKPOINTING_CLAIM = {"x": 0.33, "y": 0.80, "label": "claim: 33% extra compute for 80% memory saving"}
TENSOR_SLICE_CLAIM = {"y": 0.67, "label": "claim: tensor-slice recompute, 67% VRAM reduction"}
UNSOURCED_CLAIMS = ("'33% extra compute for 80% memory saving' (activation checkpointing) and '67% VRAM reduction' "
                    "(tensor-slice recompute) are claims made for recomputation; FACTS.md records no source for either, "
                    "so they are drawn as stated, unverified. Chen et al. 2016 (FACTS.md) report O(sqrt n) memory for "
                    "one extra forward (48 GB -> 7 GB for 30% more time on a 1000-layer ResNet)")
POLICY_FAMILIES = ["none", "full", "selective", "deepseek", "layers", "budget", "slices", "tensors"]


def policy_family(policy):
    """A policy spec's family: "layers:0.4" -> "layers"; "full" -> "full"."""
    return str(policy).split(":")[0]


def policy_parameter(policy):
    """The number after the family ("layers:0.4" -> 0.4), or None."""
    parts = str(policy).split(":", 1)
    try:
        return float(parts[1]) if len(parts) == 2 else None
    except ValueError:
        return None


def family_style(family):
    """Colour by policy family (one fixed colour each across figures)."""
    index = POLICY_FAMILIES.index(family) if family in POLICY_FAMILIES else len(POLICY_FAMILIES)
    return {"color": f"C{index}"}


def recipe_label(recipe):
    """A recipe axis value without its folder and .toml."""
    return pathlib.Path(str(recipe)).name.removesuffix(".toml")
