"""The only code that touches the kubernetes client: cluster discovery (`discovery`) and the
identity-Lease host decoder, over `cluster.ClusterAccess`. Client exceptions become
`errors.ClusterError` there and nowhere else. Nothing is imported here, so that importing
`errors` does not load the client."""
