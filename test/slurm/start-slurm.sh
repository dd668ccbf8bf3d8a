#!/usr/bin/env bash
# Starts a one-node Slurm (munge, slurmctld, slurmd) in DIR, for the launch
# tests: exit 0 once `sinfo` shows the node idle; exit 77, saying why, when
# the packages or the daemons are not there (the tests then skip).
#   start-slurm.sh DIR          stop-slurm: kill $(cat DIR/*.pid)
set -u
dir=$1
mkdir -p "$dir"/state "$dir"/spool "$dir"/log
for tool in slurmctld slurmd munged srun sinfo; do
  command -v $tool >/dev/null || { echo "slurm: $tool is not installed"; exit 77; }
done
host=$(hostname -s)
cpus=$(nproc)
cat > "$dir/slurm.conf" <<CONF
ClusterName=loomtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$((16817 + RANDOM % 1000))
SlurmdPort=$((17817 + RANDOM % 1000))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName=$host CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF="$dir/slurm.conf"
# munge: a key of our own, its socket in DIR.
mkdir -p "$dir/munge"
dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" 2>/dev/null
chmod 400 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
  --pid-file="$dir/munge.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/seed" -f 2>"$dir/log/munged.err" \
  || { echo "slurm: munged does not start: $(cat "$dir/log/munged.err")"; exit 77; }
echo "$dir/munge/socket" > "$dir/munge-socket"
slurmctld -f "$dir/slurm.conf" 2>>"$dir/log/slurmctld.err" \
  || { echo "slurm: slurmctld does not start"; exit 77; }
slurmd -f "$dir/slurm.conf" 2>>"$dir/log/slurmd.err" \
  || { echo "slurm: slurmd does not start"; exit 77; }
for i in $(seq 60); do
  if sinfo -h -o %t 2>/dev/null | grep -q idle; then exit 0; fi
  sleep 1
done
echo "slurm: the node did not become idle:"; tail -5 "$dir"/log/*.log
exit 77
