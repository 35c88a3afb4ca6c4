"""`python -m demo [--once]`: see demo/demo.py."""

from .demo import main

raise SystemExit(main())
