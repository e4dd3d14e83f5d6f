#!/usr/bin/env bash
# A one-node SLURM on this machine for the cluster tests (tests/test_slurm.py) and the
# paper-scale measurement (benchmarks/bench_slurm_simulation.py): Debian's slurm-wlm and munge,
# started as root without systemd; with --accounting also slurmdbd on MariaDB.
#
#   scripts/slurm/cluster.sh install             # the packages (`make slurm`); cheap once installed
#   scripts/slurm/cluster.sh start [--accounting] # the daemons, until the node is idle
#   scripts/slurm/cluster.sh stop                 # only the daemons this script started
#   scripts/slurm/cluster.sh status               # prints the mode it runs in (none: exit 1)
#
# slurm.conf goes to the default path (the executor plugin strips SLURM_CONF inside jobs, so a
# job's `srun` would not find it elsewhere) and carries MARK on its first line: `start` refuses a
# slurm.conf without it, and a slurmctld it did not start. What it started is listed in STATE.
# AURA_SLURM_CPUS: the CPUs the node declares (default: this machine's).
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
DBD_CONF=$CONF_DIR/slurmdbd.conf
MARK="# written by AURA-Eval's scripts/slurm/cluster.sh (one-node test cluster)"
STATE=/run/aura-slurm            # pid files, the mode, what was started
LIB=/var/lib/aura-slurm          # slurm's state and spool, the database password
LOGS=/var/log/aura-slurm
CLUSTER=aura
PARTITION=main
ACCOUNT=aura
PACKAGES=(slurm-wlm munge)
DB_PACKAGES=(slurmdbd mariadb-server)

die() { echo "cluster.sh: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_packages() {
    need_root
    local missing=()
    for p in "${PACKAGES[@]}" "${DB_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] && return 0
    # Debian's maintainer scripts try to start the daemons; without systemd that only warns.
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

installed() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null
}

foreign_checks() {
    if [ -e "$CONF" ] && [ "$(head -n1 "$CONF")" != "$MARK" ]; then
        die "$CONF was not written by this script: refusing to replace a site's SLURM configuration"
    fi
    local pid
    for pid in $(pgrep -x slurmctld || true); do
        [ -s "$STATE/slurmctld.pid" ] && [ "$(cat "$STATE/slurmctld.pid")" = "$pid" ] ||
            die "a slurmctld this script did not start is running (pid $pid): refusing to start another"
    done
}

write_conf() {
    local accounting=$1 host cpus mem
    host=$(hostname -s)
    cpus=${AURA_SLURM_CPUS:-$(nproc)}
    # what slurmd finds, less 1 GiB for the host; a node declaring more memory than it has is drained
    mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1024 ))
    {
        echo "$MARK"
        cat <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=slurm
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
StateSaveLocation=$LIB/ctld
SlurmdSpoolDir=$LIB/d
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
AuthType=auth/munge
MpiDefault=none
# no cgroups: no systemd here to delegate them
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SchedulerType=sched/backfill
# SLURM's default, stated: squeue shows a finished job this long (the plugin polls at most every 180 s)
MinJobAge=300
JobCompType=jobcomp/none
EOF
        if [ "$accounting" = 1 ]; then
            echo "AccountingStorageType=accounting_storage/slurmdbd"
            echo "AccountingStorageHost=localhost"
        else
            echo "AccountingStorageType=accounting_storage/none"
        fi
        echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN"
        echo "PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP"
    } > "$CONF"
    chmod 644 "$CONF"
}

start_munge() {
    # a munged already running (the site's, or one we started) serves this node too
    if pgrep -x munged >/dev/null; then return 0; fi
    [ -s /etc/munge/munge.key ] || { mungekey --create --keyfile=/etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key; }
    install -d -o munge -g munge -m 755 /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid </dev/null >/dev/null 2>&1
    for _ in $(seq 50); do alive /run/munge/munged.pid && break; sleep 0.1; done
    cp /run/munge/munged.pid "$STATE/munged.pid"
}

start_mariadb() {
    if pgrep -x mariadbd >/dev/null || pgrep -x mysqld >/dev/null; then
        die "a MariaDB/MySQL this script did not start is running: refusing to use it"
    fi
    install -d -o mysql -g mysql -m 755 /run/mysqld
    runuser -u mysql -- /usr/sbin/mariadbd --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock \
        --pid-file=/run/mysqld/aura-mariadbd.pid --skip-networking=0 --bind-address=127.0.0.1 \
        </dev/null >"$LOGS/mariadbd.log" 2>&1 &
    for _ in $(seq 100); do mariadb -e "select 1" >/dev/null 2>&1 && break; sleep 0.2; done
    mariadb -e "select 1" >/dev/null || die "MariaDB did not start (see $LOGS/mariadbd.log)"
    cp /run/mysqld/aura-mariadbd.pid "$STATE/mariadbd.pid"
    # the password lives only on this machine, readable by root
    [ -s "$LIB/dbpass" ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$LIB/dbpass")
    local pass; pass=$(cat "$LIB/dbpass")
    mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pass';
                ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

start_slurmdbd() {
    local pass; pass=$(cat "$LIB/dbpass")
    if [ -e "$DBD_CONF" ] && [ "$(head -n1 "$DBD_CONF")" != "$MARK" ]; then
        die "$DBD_CONF was not written by this script: refusing to replace it"
    fi
    (umask 077; cat > "$DBD_CONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
PidFile=$STATE/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
    )
    chown slurm:slurm "$DBD_CONF"  # slurmdbd refuses a file others can read
    chmod 600 "$DBD_CONF"
    /usr/sbin/slurmdbd </dev/null >/dev/null 2>&1
    for _ in $(seq 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
    sacctmgr -n list cluster >/dev/null || die "slurmdbd did not answer (see $LOGS/slurmdbd.log)"
    sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
    sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" >/dev/null 2>&1 || true
    sacctmgr -i add user root Account="$ACCOUNT" Cluster="$CLUSTER" >/dev/null 2>&1 || true
}

wait_idle() {
    local host state
    host=$(hostname -s)
    for _ in $(seq 150); do
        state=$(sinfo -h -N -n "$host" -o %T 2>/dev/null || true)
        case "$state" in
            idle) return 0 ;;
            drain*|down*) scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 0.2
    done
    die "the node did not become idle within 30 s (state: ${state:-none}; see $LOGS/)"
}

start() {
    need_root
    local accounting=0
    [ "${1:-}" = "--accounting" ] && accounting=1
    installed || die "slurm-wlm and munge are not installed (run \`make slurm\` as root)"
    [ "$accounting" = 0 ] || command -v slurmdbd >/dev/null || die "slurmdbd is not installed (make slurm)"
    foreign_checks
    if [ -s "$STATE/mode" ] && alive "$STATE/slurmctld.pid"; then
        [ "$(cat "$STATE/mode")" = "$accounting" ] && { wait_idle; return 0; }
        stop  # the other mode runs: restart in this one
    fi
    local t0; t0=$(date +%s%N)
    install -d -m 755 "$STATE" "$LOGS" "$LIB"
    install -d -o slurm -g slurm -m 755 "$LIB/ctld" "$LIB/d"
    chown slurm:slurm "$LOGS"
    rm -rf "${LIB:?}/ctld/"* "${LIB:?}/d/"*  # a fresh cluster: job ids from 1, no jobs left over
    write_conf "$accounting"
    start_munge
    if [ "$accounting" = 1 ]; then
        start_mariadb
        start_slurmdbd
    fi
    # their output to the logs only: a daemon holding our stdout would keep a caller's pipe open
    /usr/sbin/slurmctld -i </dev/null >/dev/null 2>&1
    /usr/sbin/slurmd </dev/null >/dev/null 2>&1
    echo "$accounting" > "$STATE/mode"
    wait_idle
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    printf 'one-node SLURM up (%s) in %d.%01d s\n' "$([ "$accounting" = 1 ] && echo accounting || echo "no accounting")" \
        $((ms / 1000)) $((ms % 1000 / 100))
}

stop_pid() {  # the daemon whose pid file this script keeps, and wait for it to end
    local file=$STATE/$1.pid pid
    alive "$file" || { rm -f "$file"; return 0; }
    pid=$(cat "$file")
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    rm -f "$file"
}

stop() {
    need_root
    [ -d "$STATE" ] || return 0
    # scancel the test jobs left behind, so slurmd leaves no job processes
    alive "$STATE/slurmctld.pid" && scancel --full --state=RUNNING,PENDING -u root 2>/dev/null || true
    stop_pid slurmd
    stop_pid slurmctld
    stop_pid slurmdbd
    stop_pid mariadbd
    stop_pid munged
    rm -f "$STATE/mode"
}

status() {
    if [ -s "$STATE/mode" ] && alive "$STATE/slurmctld.pid"; then
        [ "$(cat "$STATE/mode")" = 1 ] && echo accounting || echo no-accounting
    else
        echo none
        return 1
    fi
}

case "${1:-}" in
    install) install_packages ;;
    start) shift; start "$@" ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 install | start [--accounting] | stop | status" ;;
esac
