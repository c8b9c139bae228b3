"""What a lab run does to its cluster: the playbook's take-down steps, the upgrade's drains
and reboots, an eviction of the daemon, a prober on a master, client-go's informers beside
the daemon. It knows no judge."""
