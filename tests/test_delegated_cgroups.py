"""A cgroup subtree delegated to the user grading (issue 37): found, taken and used, against a
fake cgroup folder whose writes follow the kernel's rules for the files the kit touches.

Untested on a real delegated subtree: this machine has neither systemd (PID 1 is not systemd,
so no ``systemd-run --user --scope -p Delegate=yes``) nor a delegated cgroup v2 group; its
cgroup2 mount offers no controllers. What is tested is what the kit does with a subtree laid
out as systemd's documentation and the kernel's describe one (``grader/sandbox/cgroups.py``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from grader.sandbox import cgroups, node

SCOPE = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
GIB = 1 << 30


class FakeKernel:
    """The cgroup files' rules the kit meets: writing a pid to ``cgroup.procs`` moves it there
    from wherever it was; ``cgroup.subtree_control`` of a group that holds processes (not the
    root) is refused (no internal processes), as is a controller its parent does not give."""

    def __init__(self, root: Path):
        self.root = root
        self.writes: list[tuple[str, str]] = []

    @staticmethod
    def read(path: Path) -> str:  # a file the kernel makes in every new group
        return path.read_text() if path.is_file() else ""

    def write(self, path: Path, value: str) -> None:
        self.writes.append((str(path.relative_to(self.root)), value))
        folder = path.parent
        if path.name == "cgroup.procs":
            for procs in self.root.rglob("cgroup.procs"):
                kept = [p for p in procs.read_text().split() if p != value]
                procs.write_text("".join(f"{p}\n" for p in kept))
            path.write_text(self.read(path) + f"{value}\n")
            return
        if path.name == "cgroup.subtree_control":
            if folder != self.root and self.read(folder / "cgroup.procs").split():
                raise OSError(errno.EBUSY, "no internal processes")
            wanted = [word[1:] for word in value.split()]
            offered = self.read(folder / "cgroup.controllers").split() or [
                word[1:] for word in self.read(folder.parent / "cgroup.subtree_control").split()]
            if not set(wanted) <= set(offered):
                raise OSError(errno.EINVAL, "not offered")
        path.write_text(value)


def mkgroup(folder: Path, controllers: str, procs: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.controllers").write_text(controllers)
    (folder / "cgroup.procs").write_text(procs)
    (folder / "cgroup.subtree_control").write_text("")
    return folder


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A cgroup v2 mount at ``tmp_path``, this user's scope delegated with the three
    controllers, holding this process and one other; the kit pointed at it."""
    mkgroup(tmp_path, "cpuset cpu io memory hugetlb pids")
    scope = mkgroup(tmp_path / SCOPE.lstrip("/"), "cpu memory pids", "4242\n4243\n")
    kernel = FakeKernel(tmp_path)
    monkeypatch.setattr(cgroups, "_write", kernel.write)

    def point(controllers: str = "cpu memory pids") -> cgroups.Hierarchy | None:
        (scope / "cgroup.controllers").write_text(controllers)
        found = cgroups.find(tmp_path, {"": SCOPE}, as_root=False)
        monkeypatch.setattr(cgroups, "hierarchy", lambda: found)
        cgroups._kit_folders.cache_clear()
        return found

    yield tmp_path, scope, kernel, point
    cgroups._kit_folders.cache_clear()


def test_a_delegated_v2_scope_is_found_with_the_controllers_it_offers(fake):
    root, scope, _, point = fake
    found = point()
    assert found == cgroups.Hierarchy(2, dict.fromkeys(cgroups.CONTROLLERS, scope),
                                      delegated=True, controllers=cgroups.CONTROLLERS)
    # from inside the leaf the kit moved it into, the same subtree
    assert cgroups.find(root, {"": f"{SCOPE}/{cgroups.LEAF}"}, as_root=False) == found
    assert point("memory pids").controllers == ("memory", "pids")
    assert point("cpu pids") is None  # no memory controller: rlimits bound the memory
    point()
    os.chown(scope, 12345, 12345)  # another user's group: not delegated to this one
    assert cgroups.find(root, {"": SCOPE}, as_root=False) is None
    os.chown(scope, os.geteuid(), os.getegid())
    (scope / "cgroup.subtree_control").chmod(0o444)
    if os.geteuid() != 0:  # root writes whatever the mode says
        assert cgroups.find(root, {"": SCOPE}, as_root=False) is None


def test_a_workers_group_in_a_delegated_scope_gets_the_roots_limits(fake):
    root, scope, kernel, point = fake
    point()
    group = cgroups.worker_group(2 * GIB, 64)
    assert group is not None
    # the scope's processes first moved into a leaf: then its children may have controllers
    assert (scope / "cgroup.procs").read_text() == ""
    assert (scope / cgroups.LEAF / "cgroup.procs").read_text().split() == ["4242", "4243"]
    kit, student = scope / cgroups.NAME, scope / cgroups.NAME / f"g{os.getpid()}"
    written = dict(kernel.writes)
    enable = "+memory +pids +cpu"
    rel = lambda path: str(path.relative_to(root))  # noqa: E731
    assert written[rel(scope / "cgroup.subtree_control")] == enable
    assert written[rel(kit / "cgroup.subtree_control")] == enable
    assert written[rel(student / "cgroup.subtree_control")] == enable
    assert written[rel(student / "memory.max")] == str(2 * GIB + 2 * cgroups.MEMORY_HEADROOM)
    assert written[rel(student / "cpu.max")] == f"{cgroups.CPU_PERIOD_US} {cgroups.CPU_PERIOD_US}"
    worker = group.folders["memory"]
    assert worker.parent == student and group.controllers == ["cpu", "memory", "pids"]
    assert written[rel(worker / "memory.max")] == str(2 * GIB + cgroups.MEMORY_HEADROOM)
    assert written[rel(worker / "pids.max")] == str(64 + cgroups.PROCESSES_OF_THE_KIT)
    assert group.procs == [str(worker / "cgroup.procs")]  # the keeper joins it
    assert (cgroups.enforced(), cgroups.missing_limits()) == ("delegated cgroups", [])
    assert node.NodeIsolation("user", cgroups.enforced(), cgroups.controllers()).label() == (
        "user namespaces, delegated cgroups")


def test_a_scope_without_the_cpu_controller_bounds_memory_and_processes_only(fake):
    root, scope, kernel, point = fake
    point("memory pids")
    group = cgroups.worker_group(GIB, 1)
    assert group is not None and group.controllers == ["memory", "pids"]
    assert (scope / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert not any(path.endswith("cpu.max") for path, _ in kernel.writes)
    assert cgroups.enforced() == "delegated cgroups (memory, pids) and rlimits"
    assert cgroups.missing_limits() == [cgroups.NO_CPU]
    found = node.NodeIsolation("user", cgroups.enforced(), cgroups.controllers())
    assert found.label() == ("user namespaces, delegated cgroups (memory, pids) and rlimits; "
                             "no CPU share")


def test_user_owned_v1_groups_are_taken_as_slurm_made_them(tmp_path):
    """Slurm's task/cgroup on cgroup v1 chowned a job's step and task groups to its user
    (before 23.02.5): the memory hierarchy's are then this user's to divide."""
    task = "/slurm/uid_1000/job_42/step_0/task_0"
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "cgroup.procs").write_text("")
    mkgroup(tmp_path / "memory" / task.lstrip("/"), "")
    found = cgroups.find(tmp_path, {"memory": task, "cpuset": task}, as_root=False)
    assert found == cgroups.Hierarchy(1, {"memory": tmp_path / "memory" / task.lstrip("/")},
                                      delegated=True, controllers=("memory",))
