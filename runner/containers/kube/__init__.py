"""The Kubernetes backend (issue 36), built in steps: `objects` (what it sends, validated
against the Kubernetes schemas), `api` (the calls, raw JSON, a session per thread, what a
Pod's status says), `config` (which cluster, from the kubeconfig as kubectl reads it) and
`channel` (exec and attach over the API's v5 channel protocol); the `ContainerEngine` on
top of them next."""
