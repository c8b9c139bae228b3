"""The kernel data path of the lab: network namespaces, nftables DNAT and conntrack, as the
clouds' pass-through LBs and kube-proxy move a cluster's packets (`prober lab --lb kernel`)."""
