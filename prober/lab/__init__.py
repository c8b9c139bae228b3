"""The lab: a local stand-in for a cluster (fake kube-apiservers behind real load balancers)."""
