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
name = "Contoso Array 5000 — 5,000 mailbox resiliency solution"
vendor = "Contoso Storage"
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

[deployment]                # the vendor's description of what was tested
storage_model = "Contoso Array 5000"
storage_firmware = "5.2.1"
storage_software = "device-mapper multipath"
disks = "24 × 4 TB 7.2k NL-SAS"
raid = "RAID-10 (databases), RAID-1 (logs)"
connectivity = "12 Gb SAS, two paths per server"
host = "2 × 16-core, 128 GB, Debian 12"
hba = "2 × SAS HBA"
database_volumes = "6 × 2 TB"
log_volumes = "2 × 200 GB"

[campaign]
# The directories under test on this host, relative to where the campaign is run:
# point them at the volumes to validate, e.g. ["/mnt/db1", "/mnt/db2"] and ["/mnt/log1"].
db_paths = ["esrp-data/db"]
log_paths = ["esrp-data/logs"]
# run_config = "site.toml"            # an edbstress configuration for every run
# Further `edbstress run` options for every step. The profile above needs its
# mailboxes × quota of space; where a run is refused for want of space, put the options
# its message names here, e.g. ["--database-size", "10GiB"].
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
