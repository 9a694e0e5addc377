"""The Kubernetes backend (issue 36), built in steps: `objects` (what it sends, validated
against the Kubernetes schemas), `api` (the calls, raw JSON, a session per thread, what a
Pod's status says) and `config` (which cluster, from the kubeconfig as kubectl reads it)
first; attach and exec over the API's channel protocol and the `ContainerEngine` on top
of them next."""
