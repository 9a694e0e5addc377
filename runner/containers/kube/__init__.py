"""The Kubernetes backend (issue 36), built in steps: `objects` (what it sends, validated
against the Kubernetes schemas) first; the client and the `ContainerEngine` it implements
next."""
