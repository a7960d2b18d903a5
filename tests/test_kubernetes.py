"""The Kubernetes Jobs (``k8s/``): NOT run on a cluster here (the kit's CI has none, and no
container engine). What is checked: each manifest is what the README says (an Indexed Job whose
completions are the shards its command names, the securityContext the workers' namespaces need,
a merge that runs no student code unprivileged), the Dockerfile builds the interpreter the Jobs
name, and ``run.sh`` waits for a grade Job that fails as for one that completes (on 4e1a685 the
README's ``kubectl wait --for=condition=complete`` waited forever), against a stand-in kubectl.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from submission_tools import KIT

K8S = KIT / "k8s"


def job(name: str) -> dict:
    return yaml.safe_load((K8S / name).read_text())


def test_the_grade_job_is_indexed_one_shard_per_completion_with_what_the_workers_need():
    grade = job("grade-job.yaml")
    spec, pod = grade["spec"], grade["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    command = container["command"]
    assert spec["completionMode"] == "Indexed" and spec["backoffLimitPerIndex"] >= 1
    assert command[:4] == [".venv/bin/python", "-m", "grader", "batch"]
    assert int(command[command.index("--shards") + 1]) == spec["completions"]
    assert "--trust-submissions" not in command
    # a user namespace of the pod's own, root only in it, and what mount and PID namespaces
    # inside a container need: CAP_SYS_ADMIN there, no default seccomp or AppArmor profile,
    # an unmasked /proc
    assert pod["hostUsers"] is False
    security = container["securityContext"]
    assert security["capabilities"]["add"] == ["SYS_ADMIN"]
    assert security["seccompProfile"]["type"] == security["appArmorProfile"]["type"] == (
        "Unconfined")
    assert security["procMount"] == "Unmasked"
    assert [e["name"] for e in container["env"]] == ["ATTENTION_KIT_SECRET"]


def test_the_merge_job_reads_what_the_shards_wrote_unprivileged():
    merge = job("merge-job.yaml")
    (container,) = merge["spec"]["template"]["spec"]["containers"]
    grade_command = job("grade-job.yaml")["spec"]["template"]["spec"]["containers"][0]["command"]
    command = container["command"]
    assert command[3] == "merge" and command[4] == grade_command[
        grade_command.index("--json-dir") + 1]
    assert command[command.index("--submissions") + 1] == grade_command[4]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_image_holds_the_interpreter_the_jobs_name():
    text = (K8S / "Dockerfile").read_text()
    assert "FROM python:3.11" in text and "WORKDIR /kit" in text
    assert "python -m venv .venv" in text and "-r requirements.lock" in text
    ignored = (K8S / "Dockerfile.dockerignore").read_text().split()
    assert ".venv" in ignored and "solutions" not in ignored  # the key grades the hidden checks


KUBECTL = """#!/bin/bash
# A stand-in kubectl: the grade Job fails (one shard failed for good), the merge completes.
echo "$*" >> "$KUBECTL_LOG"
case "$*" in
  "wait --for=condition=complete --timeout=-1s job/attention-grade") exec sleep 600 ;;
  "wait --for=condition=failed --timeout=-1s job/attention-grade") sleep 0.3 ;;
  "wait --for=condition=failed --timeout=-1s job/attention-merge") exec sleep 600 ;;
  "wait --for=condition=complete --timeout=-1s job/attention-merge") sleep 0.3 ;;
  "get job/attention-grade -o jsonpath={.status.conditions"*) printf Failed ;;
  "get job/attention-merge -o jsonpath={.status.conditions"*) printf Complete ;;
  "get job/attention-grade -o jsonpath=failed shards"*) echo "failed shards: 7" ;;
esac
"""


def test_run_sh_merges_after_a_grade_job_that_failed_instead_of_waiting_forever(tmp_path):
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(KUBECTL)
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "log"
    done = subprocess.run(["bash", str(K8S / "run.sh")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "KUBECTL_LOG": str(log),
                                           "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert "attention-grade: Failed" in done.stdout and "failed shards: 7" in done.stdout
    assert "attention-merge: Complete" in done.stdout
    calls = log.read_text().splitlines()
    assert calls.index(f"apply -f {K8S}/merge-job.yaml") > calls.index(
        f"apply -f {K8S}/grade-job.yaml")
    assert subprocess.run(["bash", "-n", str(K8S / "run.sh")]).returncode == 0
    # no stand-in kubectl left waiting
    assert not [p for p in Path("/proc").glob("[0-9]*") if _waits_for(p, str(tmp_path))]


def _waits_for(proc: Path, marker: str) -> bool:
    try:
        return marker in (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids are claimed as root only")
def test_in_a_pods_user_namespace_a_worker_gets_a_uid_the_namespace_maps(monkeypatch):
    """A pod's user namespace maps 65536 uids: a sandbox uid past 65535 (64000 + up to 3999)
    could not be set, and its worker would not start."""
    import pwd

    from grader.sandbox import confine

    monkeypatch.setattr(confine, "_uid_ranges", lambda: ((0, 65536),))
    monkeypatch.setattr(confine, "_next_uid", [(2000 - os.getpid()) % confine.SANDBOX_UIDS])
    user, lock = confine.claim_sandbox_user(pwd.getpwnam("nobody"))
    try:
        assert lock is not None and confine.SANDBOX_UID_BASE <= user.pw_uid < 65536
    finally:
        if lock is not None:
            os.close(lock)
