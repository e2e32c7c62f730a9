//! The commented solution.toml `edbstress esrp init` writes.

/// The template: every key with what it is for.
pub const SOLUTION_TEMPLATE: &str = r#"# solution.toml: the ESRP-style campaign and its document (edbstress esrp).
#
#   edbstress esrp run --config solution.toml --rehearsal --campaign rehearsal/
#   edbstress esrp run --config solution.toml --campaign campaign/
#   edbstress esrp document campaign/ --solution solution.toml --output doc/
#
# A long text may name a Markdown file next to this one: features = "features.md".

[solution]
name = "Contoso Array 5000 — 5,000 mailbox resiliency solution"   # a mailbox count here is checked
vendor = "Contoso Storage"
author = "Jane Doe, Principal Engineer"
tested_date = ""            # as the title page shows it ("May 2026"); empty: the runs' dates
revisions = [{ date = "July 2026", description = "Initial release" }]
additional_information = """
Further documents: https://contoso.example/storage/exchange
"""
contact = """
Contoso Storage, solutions engineering — esrp@contoso.example
"""
features = """
- Dual controllers with mirrored write cache
- Thin provisioning and snapshots
"""
description = """
Two mailbox servers, each attached to its own array over 12 Gb SAS. Databases and logs
are on separate RAID groups.
"""
best_practices = """
- Keep databases and logs on separate volumes.
- Use a 64 KiB allocation unit (or file-system stripe) for database volumes.
"""
backup_strategy = """
Database copies on a second server protect against a failed array; daily snapshots
protect against logical corruption.
"""
conclusion = """
The tested configuration carried the targeted load within Exchange's latency limits.
"""

[profile]
mailboxes = 5000            # mailboxes of the whole solution
iops_per_mailbox = 0.12     # transactional IOPS per mailbox
mailbox_quota = "2048 MB"     # MB of 1,048,576 bytes, as Exchange counts a quota
servers = 1                 # mailbox servers (the mailboxes are split over them)
databases_per_server = 6
copies = 2                  # database copies (each adds a log replication reader)
version = "exchange2013"    # exchange2007, exchange2010 or exchange2013

[deployment]                # the vendor's description of what was tested; sizes in GB
                            # and TB of 2^30 and 2^40 bytes, as the ESRP documents count
                            # them; "N/A" where a row does not apply
storage_model = "Contoso Array 5000"
storage_firmware = "5.2.1"
storage_software = "Contoso Manager 5.2"
storage_cache = "2 controllers with 16 GB of mirrored cache each"
storage_controllers = "2 (active/active)"
storage_ports = "4 × 12 Gb SAS per controller"
max_bandwidth = "2 × 12 Gb SAS per server"
switch = "N/A (direct attach)"
disks = "24 × 4 TB 7.2k NL-SAS"
drive_model = "Contoso NL-SAS 4 TB, 7,200 rpm, firmware C1.0"
drive_raw_capacity = "3725 GB"
drives_tested = "22 active and 2 hot spares"
max_drives = "24"
drive_slice_size = "N/A"
drives_per_lun = "22"
raw_capacity = "81950 GB"
formatted_capacity = "40975 GB"
raid = "RAID-10 (databases), RAID-1 (logs)"
connectivity = "12 Gb SAS, two paths per server"
host = "2 × 16-core, 128 GB, Debian 12"
hba = "2 × SAS HBA, firmware 16.00"
hbas_per_host = "2"
hba_driver = "mpt3sas (Linux kernel)"
hba_queue_target = "N/A"
hba_queue_depth = "N/A"
multipath = "device-mapper multipath"
replication = "Exchange DAG replication (simulated: one log reader per extra copy)"
database_volumes = "6 × 1958 GB"        # the leading count is checked against the databases
database_lun_size = "1958 GB"           # checked: each database must fit
log_volumes = "6 × 100 GB"
log_lun_size = "100 GB"
dags = 1
servers_per_dag = 2
topology = """
One DAG of two servers, each attached to its own array: every database has an active
copy on one server and a passive copy on the other. The tested server carries all six
databases active, as after a failover.
"""
# The solution data layout: one row per volume.
[[deployment.layout]]
server = "Server 1"
storage = "Array 1"
volume = "Volume 1"
database = "DB1 and its log"
role = "active (copy 1)"
[[deployment.layout]]
server = "Server 2"
storage = "Array 2"
volume = "Volume 1"
database = "DB1 and its log"
role = "passive (copy 2)"

[campaign]
# The directories under test on this host, relative to where the campaign is run:
# point them at the volumes to validate, e.g. ["/mnt/db1", "/mnt/db2"] and ["/mnt/log1"].
db_paths = ["esrp-data/db"]
log_paths = ["esrp-data/logs"]
# run_config = "site.toml"            # an edbstress configuration for every run
# Further `edbstress run` options for every step. The profile above needs its
# mailboxes × quota of space; where a run is refused for want of space, put the options
# its message names here, e.g. ["--database-size", "10GiB"]. Stress and Performance
# run as Jetstress does (Stress auto-tunes the threads, Performance runs at them, closed
# loop); ["--pacing", "open-loop"] runs them at the target rate instead.
run_options = []
stress = "24h"                        # ESRP: at least 24 h
performance = "2h"                    # ESRP: at least 2 h
logs_to_replay = 500                  # SoftRecovery logs per database

[campaign.rehearsal]                  # --rehearsal: shortened steps to check the set-up
stress = "10m"
performance = "5m"
logs_to_replay = 50

# Several servers: list them as for `edbstress fleet`; every server runs each step
# at the same time.
# [fleet]
# [[fleet.hosts]]
# dest = "mbx1.example"
# [[fleet.hosts]]
# dest = "mbx2.example"
"#;
