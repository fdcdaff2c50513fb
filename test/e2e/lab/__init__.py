"""The TAS lab (docs/operations.md, "The TAS lab"), one package by job:

  cli        the commands of tas-lab.sh (up, run, change, nfd, relabel, status, down, env)
  cluster    the processes under the state directory: control plane, PKI, CRDs, Kueue,
             nfd-master, topogate, the labeler
  scenario   scenario files: read and checked in one place, revision, the changed scenario
  objects    the inventory files, Nodes and their usage, the TopologySource, clean-up
  kueue      Topologies, ResourceFlavors, queues, Workloads, the queue migration
  record     Kueue's decisions, diagnose's verdicts, expectations: the JSON lines
  kube       the Kubernetes API through the Kubernetes project's Python client

Run as `tas-lab.sh` (this folder's launcher, or scripts/tas-lab.sh)."""
