"""What every stage of the pipeline shares, with nothing of its own to import (numpy at most):

- `comparison` — outputs against a reference's, under named tolerances (export vs PyTorch, optimize's proof,
  `optim run --compare`, the EP's tests);
- `staging` — output files that appear whole or not at all (written beside the target, then renamed);
- `machine` — facts about this machine: CPU model, instruction-set flags, core count;
- `errors` — the two kinds of failure every stage reports: bad input (`UserError`) and a result that failed
  its check (`CheckFailed`).
"""
