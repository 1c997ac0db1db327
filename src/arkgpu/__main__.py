"""``python -m arkgpu`` runs the command line."""

from arkgpu.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
