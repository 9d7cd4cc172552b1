"""The README's Python section runs as written: its code block is taken
from the README itself and executed in a fresh directory."""

import os
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def _python_section_code():
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "the README's Python section has no python block"
    return blocks[0]


def test_readme_python_section_runs_as_written(tmp_path):
    code = _python_section_code()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope = {}
        exec(compile(code, str(README) + " (Python section)", "exec"), scope)
    finally:
        os.chdir(cwd)
    # What the block did is on disk: reopen and look.
    import tidemark

    with tidemark.open(tmp_path / "data" / "app") as db:
        assert db.table("kv").get(b"x") == b"1!"
        assert db.table("kv").get(b"k") is None
        oplog = db.get_collection("oplog")
        assert [d["o"]["a"] for d in oplog.find()] == [1, 0, 1, 2]
        assert db.get_collection("users").find_one({"_id": 1}) is None
        assert db.get_collection("events").count_documents({}) == 1
