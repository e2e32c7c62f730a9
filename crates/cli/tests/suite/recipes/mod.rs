//! The user guide's recipes for other orchestrators, run for real. Ansible: the
//! playbook against three "hosts" (module `ansible`). Slurm: the batch script on a real
//! Slurm cluster of this machine (module `slurm`). Kubernetes: the manifests and the
//! container's command line, and the image where podman can build it (module
//! `kubernetes`).

mod ansible;
mod kubernetes;
mod slurm;
