"""The Kubernetes backend (issue 36), built in steps: `objects` (what it sends, validated
against the Kubernetes schemas), `api` (the calls, raw JSON, a session per thread, what a
Pod's status says), `config` (which cluster, from the kubeconfig as kubectl reads it),
`channel` (exec and attach over the API's v5 channel protocol), `engine` (`KubeEngine`,
the `ContainerEngine` on top of them) and `preflight` (what a cluster must prove before a
run trusts it: one stream of a log, NetworkPolicies enforced)."""
