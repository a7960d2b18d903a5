#!/usr/bin/env bash
# attention-kit on Kubernetes: the grade Job, then the merge Job once every shard has ended.
# NOT TESTED HERE on a cluster (tests/test_kubernetes.py runs it against a stand-in kubectl).
#
# `kubectl wait --for=condition=complete` alone never returns when a shard fails for good: a
# Job with a failed index ends Failed, never Complete. So both conditions are waited for, and
# the first that comes ends the wait; the merge then names the failed shards' students.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

wait_for_end() {  # job: until it is Complete or Failed; prints which
    local complete failed
    kubectl wait --for=condition=complete --timeout=-1s "job/$1" >/dev/null & complete=$!
    kubectl wait --for=condition=failed --timeout=-1s "job/$1" >/dev/null & failed=$!
    wait -n "$complete" "$failed" || true
    kill "$complete" "$failed" 2>/dev/null || true
    wait "$complete" "$failed" 2>/dev/null || true
    kubectl get "job/$1" -o 'jsonpath={.status.conditions[?(@.status=="True")].type}'
    echo
}

kubectl apply -f "$here/grade-job.yaml"
echo "attention-grade: $(wait_for_end attention-grade)"
kubectl get job/attention-grade -o 'jsonpath=failed shards: {.status.failedIndexes}{"\n"}'
kubectl delete --ignore-not-found job/attention-merge
kubectl apply -f "$here/merge-job.yaml"
echo "attention-merge: $(wait_for_end attention-merge)"
kubectl logs job/attention-merge
