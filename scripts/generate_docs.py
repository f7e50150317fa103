"""Regenerate the files that are derived from code: ``schemas/*.json`` and ``docs/cli.md``.

Run ``python scripts/generate_docs.py`` after changing the event schema, the report schema or a
command's ``--help``; ``tests/test_generated_files.py`` fails until the files are up to date.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from traceq.generated import generated_files  # noqa: E402


def main() -> None:
    for relative, text in generated_files().items():
        path = ROOT / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {relative}")


if __name__ == "__main__":
    main()
