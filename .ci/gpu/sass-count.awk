# Counts matrix instructions per kernel in `cuobjdump --dump-sass` output: lines "COUNT KIND KERNEL".
# QGMMA: FP8 wgmma; HGMMA: FP16/BF16 wgmma; HGMMA-noop: the zero-operand HGMMA.64x8x16 that
# ptxas inserts to close a wgmma sequence (destination RZ: it computes nothing); LOCAL: local
# memory loads and stores (LDL, STL: spilled registers or arrays indexed at run time).
/Function :/ { f = $3 }
/QGMMA/ { n[f " QGMMA"]++ }
/[ \t](LDL|STL)[. ]/ { n[f " LOCAL"]++ }
/HGMMA/ { if ($0 ~ /HGMMA[.0-9a-zA-Z]* RZ,/) n[f " HGMMA-noop"]++; else n[f " HGMMA"]++ }
END { for (k in n) { split(k, p, " "); print n[k], p[2], p[1] } }
