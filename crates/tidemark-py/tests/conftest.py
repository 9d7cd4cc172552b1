import pytest

import tidemark


@pytest.fixture
def db(tmp_path):
    d = tidemark.open(tmp_path / "db", cache_size="16MB")
    yield d
    d.close()


@pytest.fixture
def small_fs(tmp_path):
    """A 48 MiB tmpfs to fill up (needs the right to mount: root here and in
    CI; skipped elsewhere, with the reason)."""
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
