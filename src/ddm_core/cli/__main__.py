"""``python -m ddm_core.cli`` — the same as the ``ddm`` console script."""

from ddm_core.cli import main

main()
