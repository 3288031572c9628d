"""``python -m controller``: the cloud controller manager CLI (see ``controller.app``)."""

from __future__ import annotations

from controller.app import main

raise SystemExit(main())
