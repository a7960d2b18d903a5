"""A class graded on a real Slurm, as a user grades there: a one-node cluster started on this
machine as root (Debian's slurmctld, slurmd and munge, ``make slurm-install``), then, as uid
65534 from a copy of the kit that uid owns (``as_user``), ``python -m grader slurm ...
--submit`` with 3 shards, one array task cancelled, the merge run all the same (afterany) with
that shard's students named, the shard rerun and merged again, and the merged files
byte-identical to one ``batch`` over the same class by the same user.

Run by ``make test-slurm`` (which sets ATTENTION_KIT_SLURM_TEST); skipped, with the reason,
elsewhere, as another user than root, or where Slurm is not installed. The daemons run from a
temporary folder (their own config, key, sockets, ports, state and logs) and are stopped by
their pids whatever happens."""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import as_user
import pytest
from submission_tools import KIT, make_submission
from test_shards import OUTPUTS, small_course

from grader.integrations.routes import shards

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scancel", "scontrol")
TIMEOUT = "5"  # seconds per exercise: the hanging submission's cost
# No limit per call: the hang's message must not depend on how much CPU its worker got in
# those 5 s (a 2 s CPU limit stops it first on an idle machine, the exercise's limit on a busy
# one), or the two routes below could word the same hang differently.
NO_CALL_LIMIT = ("--call-timeout", "0")
ISOLATION = "(isolation: user namespaces, rlimits; no CPU share)"


def _why_not() -> str | None:
    if not os.environ.get("ATTENTION_KIT_SLURM_TEST"):
        return "the one-node Slurm test runs in make test-slurm"
    if os.geteuid() != 0:
        return "starting slurmctld, slurmd and munged needs root"
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return (f"{', '.join(missing)} not installed: make slurm-install (as root, with apt-get) "
                "installs slurm-wlm and munge")
    return as_user.why_not()


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _config(base: Path) -> str:
    host = socket.gethostname().split(".")[0]
    ctld = _free_port()
    slurmd = next(port for port in iter(_free_port, None) if port != ctld)
    return f"""\
ClusterName=attentionkit
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={base}/munge/munge.socket
CredType=cred/munge
SlurmctldPort={ctld}
SlurmdPort={slurmd}
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/slurmctld.log
SlurmdLogFile={base}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _stop(pid_file: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
        for _ in range(50):
            os.kill(pid, 0)  # raises once it is gone
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster():
    """A one-node cluster; yields the environment its commands need (SLURM_CONF). Its folder
    is one another user can enter: the jobs' user reads the config and talks to munge."""
    base = Path(tempfile.mkdtemp(prefix="attention-kit-slurm-"))
    base.chmod(0o755)
    for folder in ("munge", "state", "spool"):
        (base / folder).mkdir(mode=0o755)
    key = base / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (base / "slurm.conf").write_text(_config(base))
    (base / "slurm.conf").chmod(0o644)
    env = {**os.environ, "SLURM_CONF": str(base / "slurm.conf")}
    started: list[Path] = []
    try:
        munge = base / "munge"
        started.append(munge / "munged.pid")
        subprocess.run(["munged", "--force", f"--socket={munge}/munge.socket",
                        f"--key-file={key}", f"--log-file={munge}/munged.log",
                        f"--pid-file={munge}/munged.pid", f"--seed-file={munge}/seed"],
                       check=True, timeout=30)
        for daemon in ("slurmctld", "slurmd"):
            started.append(base / f"{daemon}.pid")
            subprocess.run([daemon, "-f", str(base / "slurm.conf")], check=True, env=env,
                           timeout=30)
        for _ in range(150):
            state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                                   env=env, timeout=30).stdout.split()
            if state == ["idle"]:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the node never came up: {state}\n" + _logs(base))
        yield env
    finally:
        if len(started) == 3:  # the jobs first: their processes would outlive slurmd
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                for user in ("root", str(as_user.UID)):
                    subprocess.run(["scancel", f"--user={user}"], env=env, timeout=30)
                for _ in range(50):
                    if not subprocess.run(["squeue", "-h"], capture_output=True, text=True,
                                          env=env, timeout=30).stdout.strip():
                        break
                    time.sleep(0.2)
        for pid_file in reversed(started):
            _stop(pid_file)
        shutil.rmtree(base, ignore_errors=True)


def _logs(base: Path, pattern: str = "*.log") -> str:
    return "\n".join(f"== {p}\n{p.read_text()[-2000:]}" for p in sorted(base.rglob(pattern)))


def _run(*words: str, env: dict[str, str], user: as_user.UserKit | None = None) -> str:
    """``words`` as root, or as the kit's user when ``user`` is given."""
    command = user.command(*words) if user is not None else list(words)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300,
                          cwd=user.folder if user is not None else None)
    assert done.returncode == 0, f"{' '.join(words)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _wait(job: str, env: dict[str, str], limit: float = 240) -> None:
    """Until no task of ``job`` is pending or running."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if not _run("squeue", "-h", "-j", job, "-o", "%i %T", env=env).strip():
            return
        time.sleep(0.3)
    pytest.fail(f"job {job} still queued after {limit} s")


def _state(job: str, env: dict[str, str]) -> str:
    text = _run("scontrol", "-o", "show", "job", job, env=env)
    return text.split("JobState=")[1].split()[0]


def _field(job: str, name: str, env: dict[str, str]) -> str:
    text = _run("scontrol", "-o", "show", "job", job, env=env)
    return text.split(f"{name}=")[1].split()[0]


def nine_students(root: Path) -> list[str]:
    """Correct, wrong, one that hangs, one whose worker exits, empty, a syntax error."""
    make_submission(root / "a-key")
    make_submission(root / "b-stubs", base=KIT / "exercises")
    make_submission(root / "c-no-max", {"softmax.py": """\
        import numpy as np


        def softmax(logits, axis=-1):
            e = np.exp(logits)
            return e / e.sum(axis=axis, keepdims=True)
        """})
    make_submission(root / "d-hangs", {"softmax.py": "while True:\n    pass\n"})
    make_submission(root / "e-exits", {"softmax.py": """\
        def softmax(logits, axis=-1):
            raise SystemExit(9)
        """})
    make_submission(root / "f-key")
    (root / "g-empty").mkdir()
    make_submission(root / "h-syntax", {"softmax.py": "def softmax(:\n"})
    make_submission(root / "i-key")
    return sorted(p.name for p in root.iterdir())


def test_a_class_graded_in_3_slurm_tasks_by_a_user_merges_to_what_one_batch_writes(cluster):
    kit = as_user.kit()
    env = {**kit.env, "SLURM_CONF": cluster["SLURM_CONF"]}
    work = kit.base / "home" / "slurm"
    root = work / "class"
    students = nine_students(root)
    course = str(small_course(work / "course.toml"))
    for folder, _, files in os.walk(work):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            os.chown(name, as_user.UID, as_user.GID)
    grader = [str(kit.python), "-m", "grader"]
    whole = work / "whole"
    _run(*grader, "batch", str(root), "--course", course, "--csv", str(whole / "grades.csv"),
         "--report", str(whole / "report"), "--jobs", "2", "--timeout", TIMEOUT, *NO_CALL_LIMIT,
         env=env, user=kit)

    shared = work / "shared"
    printed = _run(*grader, "slurm", str(root), "--shards", "3", "--out", str(shared),
                   "--course", course, "--cpus-per-task", "1", "--timeout", TIMEOUT,
                   *NO_CALL_LIMIT, "--throttle", "2", "--sbatch-arg=--comment=attention-kit",
                   "--submit", env=env, user=kit)
    ids = dict(line.split(": ", 1) for line in printed.splitlines() if ": " in line)
    grade, merge = ids["grade job"], ids["merge job"]
    assert _field(grade, "UserId", cluster).startswith("nobody(")  # the submitting user's
    assert _field(merge, "Dependency", cluster).startswith(f"afterany:{grade}")
    _run("scancel", f"{grade}_2", env=env, user=kit)  # at once: pending, or still starting up
    _wait(grade, cluster)
    # a task cancelled while still pending leaves no record of its own ("Job 1_2 not found");
    # the merge below shows it never ran: its students have no result
    cancelled = subprocess.run(["scontrol", "-o", "show", "job", f"{grade}_2"],
                               capture_output=True, text=True, env=cluster, timeout=30)
    assert ("JobState=CANCELLED" in cancelled.stdout if cancelled.returncode == 0
            else "not found" in cancelled.stdout + cancelled.stderr), cancelled
    assert [_state(f"{grade}_{k}", cluster) for k in (0, 1)] == ["COMPLETED", "COMPLETED"]
    # afterany: the merge runs all the same (4e1a685's afterok left it pending forever,
    # DependencyNeverSatisfied), and names the students of the task that did not run
    _wait(merge, cluster)
    assert _state(merge, cluster) == "COMPLETED", _logs(shared / "logs", "*.out")
    with open(shared / "grades.csv", newline="") as handle:
        status = {row["student"]: row["status"] for row in csv.DictReader(handle)}
    lost = shards.select(students, shards.Shard(2, 3))
    assert list(status) == students and len(lost) == 3
    assert {s: status[s] for s in students if status[s].startswith("not graded")} == {
        s: "not graded: no result (shard 2 of 3)" for s in lost}
    with open(whole / "grades.csv") as mine, open(shared / "grades.csv") as theirs:
        kept = [line for line in theirs if line.split(",")[0] not in lost]
        assert kept == [line for line in mine if line.split(",")[0] not in lost]

    rerun = _run("sbatch", "--parsable", "--array=2", str(shared / "grade.sbatch"),
                 env=env, user=kit).strip()
    again = _run("sbatch", "--parsable", f"--dependency=afterany:{rerun}",
                 str(shared / "merge.sbatch"), env=env, user=kit).strip()
    _wait(again, cluster)
    assert _state(again, cluster) == "COMPLETED", _logs(shared / "logs", "*.out")
    for name in OUTPUTS:
        assert (shared / name).read_bytes() == (whole / name).read_bytes(), name
    statuses = (whole / "grades.csv").read_text()
    # graded as that user: user namespaces and rlimits, and each row says so
    assert f'd-hangs,0,0,"graded {ISOLATION}"' in statuses
    assert f'g-empty,,,"empty {ISOLATION}"' in statuses
