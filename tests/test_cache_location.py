"""The response cache refuses a network file system (SQLite's WAL mode is not safe there),
read from /proc/self/mountinfo; `llm.cache_on_network_fs` overrides."""

import pytest

from aura_eval.llm import cache
from aura_eval.llm.cache import CacheLocationError, ResponseCache, check_cache_location, file_system

# Lines in the kernel's format: id, parent, dev, root, mount point, options, optional fields, "-",
# type, source, super options. /data/scratch is a local disk mounted inside the NFS home.
MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
25 22 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
40 22 0:40 / /data rw,relatime shared:7 master:2 - nfs4 filer:/export/data rw,vers=4.2
41 40 8:17 / /data/scratch rw,relatime - xfs /dev/sdb1 rw
42 22 0:41 / /mnt/team\\040share rw - cifs //srv/team rw
43 22 0:42 / /lustre rw - lustre 10.0.0.1@tcp:/fs rw
44 22 0:43 / /remote rw,nosuid - fuse.sshfs me@host:/ rw
45 22 0:44 / /data2 rw - nfs filer:/a rw
46 22 0:45 / /data2 rw - ext4 /dev/sdc1 rw
"""


@pytest.mark.parametrize("path, expected", [
    ("/home/me/cache/aura.sqlite", ("ext4", "/")),
    ("/data/run1/cache/aura.sqlite", ("nfs4", "/data")),
    ("/data/scratch/aura.sqlite", ("xfs", "/data/scratch")),  # the deepest mount holds it
    ("/datasets/aura.sqlite", ("ext4", "/")),  # /data is not a parent of /datasets
    ("/mnt/team share/aura.sqlite", ("cifs", "/mnt/team share")),  # \040 is a space
    ("/lustre/aura.sqlite", ("lustre", "/lustre")),
    ("/remote/aura.sqlite", ("fuse.sshfs", "/remote")),
    ("/data2/aura.sqlite", ("ext4", "/data2")),  # mounted over the NFS one: the last mount wins
])
def test_file_system_of_a_path_from_mountinfo(path, expected):
    assert file_system(path, MOUNTINFO) == expected


@pytest.mark.parametrize("path, refused", [("/home/me/aura.sqlite", None), ("/data/x/aura.sqlite", "nfs4"),
                                           ("/data/scratch/aura.sqlite", None), ("/mnt/team share/a.sqlite", "cifs"),
                                           ("/lustre/a.sqlite", "lustre"), ("/remote/a.sqlite", "fuse.sshfs"),
                                           ("/dev/shm/a.sqlite", None)])
def test_a_cache_on_a_network_file_system_is_refused_naming_the_setting(path, refused):
    if refused is None:
        check_cache_location(path, mountinfo=MOUNTINFO)
        return
    with pytest.raises(CacheLocationError) as err:
        check_cache_location(path, mountinfo=MOUNTINFO)
    message = str(err.value)
    assert message.startswith(f"llm.cache: {path} is on a {refused} file system")
    assert "llm.cache_on_network_fs: true" in message and "Running on a cluster" in message
    check_cache_location(path, allow_network_fs=True, mountinfo=MOUNTINFO)  # the documented override


def test_the_model_client_opens_no_cache_on_nfs(tmp_path, monkeypatch):
    """The job itself checks too (a model job started on another host): the real mount table
    swapped for one that puts tmp_path on NFS."""
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO + f"50 22 0:50 / {tmp_path} rw - nfs4 filer:/scratch rw\n")
    monkeypatch.setattr(cache, "MOUNTINFO", table)
    from aura_eval.llm.client import ModelClient

    settings = {"cache": str(tmp_path / "c" / "cache.sqlite"), "replay": False, "concurrency": {"default": 1}}
    with pytest.raises(CacheLocationError, match="is on a nfs4 file system"):
        ModelClient(settings, "t", progress=False)
    assert not (tmp_path / "c").exists()  # refused before anything is created
    ModelClient({**settings, "cache_on_network_fs": True}, "t", progress=False)
    assert (tmp_path / "c" / "cache.sqlite").exists()
    assert len(ResponseCache(tmp_path / "c" / "cache.sqlite", allow_network_fs=True)) == 0
