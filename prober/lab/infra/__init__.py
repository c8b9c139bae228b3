"""The lab's infrastructure: the stand-in cluster (apiservers behind one backend interface,
etcd, the LBs on the kernel path or HAProxy, the nodes' network), the processes it runs, the
daemon's configuration, and the truth as each part records it. It knows no scenario and no
judge."""
