#!/bin/sh
# Builds tern and provisions real instances on a lab datacenter, end to end: starts
# the lab on its embedded default (three servers, one agent each, a private Redis) in a
# fresh directory, provisions two instances (the second running the `writer`
# workload, with room left in its flexible disk package), shows them, their servers'
# capacity, their disk files (apparent size against the blocks they use) and their
# NICs, grows the writer's data disk while it writes and checks its records, shares a
# volume between two instances, migrates a third (two disks, a NIC, the volume) to
# another server while its writer writes, deletes one instance, and stops the lab. It exits non-zero when any step fails. Every
# process it started is stopped by pid on the way out, whatever happened.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
tools/deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null
tern=$root/build/cli/tern

lab=$(mktemp -d "${TMPDIR:-/tmp}/tern-example.XXXXXX")
up=false
cleanup() {
    status=$?
    if $up; then
        tools/lab down --dir "$lab" >/dev/null 2>&1 || echo "run-example: tools/lab down --dir $lab failed" >&2
    fi
    if [ "$status" -ne 0 ] && [ -d "$lab" ]; then
        echo "run-example: failed; the lab's logs are in $lab (control/ternd.log, agents/*/ternd.log)" >&2
    else
        rm -rf "$lab"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n== %s\n' "$*"; }

say "tools/lab up --dir $lab"
tools/lab up --dir "$lab" --workflows "$root/workflows" > "$lab.up" 2>&1 || { cat "$lab.up" >&2; rm -f "$lab.up"; exit 1; }
up=true
tail -n 1 "$lab.up"
TERN_URL=$(sed -n 's/^TERN_URL=//p' "$lab.up" | tail -n 1)
rm -f "$lab.up"
export TERN_URL

say "tern vm create --alias web0 (idle workload)"
"$tern" vm create --alias web0 --package lab-small --image lab-os --network external --watch
say "tern vm create --alias db0 --package lab-large --disks '[{}, {\"size\": 20480}]' --metadata lab:workload=writer"
# lab-large's 100 GiB hold a 10 GiB boot disk and a 20 GiB data disk: 70 GiB stay
# free for the resize below.
"$tern" vm create --alias db0 --package lab-large --image lab-os --network external \
    --network internal --disks '[{}, {"size": 20480}]' --metadata lab:workload=writer --watch

say "tern vm list"
"$tern" vm list
say "tern server list (RAM and disk committed / total)"
"$tern" server list

say "the instances' disk files: apparent size against the blocks used"
for alias in web0 db0; do
    "$tern" vm get "$alias" -j | python3 -c '
import json, os, sys
vm = json.load(sys.stdin)
for d in vm.get("disks") or []:
    st = os.stat(d["path"])
    print("%-5s %-7s %-4s %9.1f MiB apparent %7.1f MiB used  %s" % (
        vm["alias"], d.get("pci_slot"), "boot" if d.get("boot") else "data",
        st.st_size / 1048576.0, st.st_blocks * 512 / 1048576.0, d["path"]))
'
done

say "tern nic list"
"$tern" nic list
say "the writer's records so far (tern-workload verify on db0's data disk)"
disk=$("$tern" vm get db0 -j | python3 -c '
import json, sys
print([d["path"] for d in json.load(sys.stdin)["disks"] if not d.get("boot")][0])')
# On a disk the writer is still writing, the count is right but a batch landing can
# read as a gap at its tail, so the verdict is not this demo's to judge.
echo "db0's data disk holds $(build/lab/tern-workload verify "$disk" 2>/dev/null || true) valid records"

say "grow db0's data disk from 20 GiB to 40 GiB while its writer runs"
records() { # the count so far (a batch landing can read as a gap at the tail: no verdict)
    c=$(build/lab/tern-workload verify "$disk" 2>/dev/null || true)
    echo "${c:-0}"
}
wait_records() { # until the writer has written more than $1 records, 10 s at most
    i=0
    while [ "$(records)" -le "$1" ]; do
        i=$((i + 1))
        [ $i -le 100 ] || { echo "run-example: db0's writer wrote nothing past record $1 in 10 s" >&2; exit 1; }
        sleep 0.1
    done
}
wait_records 0
ls -ls "$disk"
"$tern" vm disk resize db0 0:4:1 40G --watch
echo "after the resize (first column: KiB allocated; then the apparent size in bytes):"
ls -ls "$disk"
size=$(stat -c %s "$disk")
[ "$size" -eq $((40960 * 1048576)) ] || { echo "run-example: db0's data disk is $size bytes, not 40 GiB" >&2; exit 1; }
"$tern" vm disks db0
"$tern" vm get db0 -o flexible_disk_size,free_space
n=$(records)
wait_records "$n"
echo "db0's writer goes on: $(records) records"
say "tern vm stop db0; tern-workload verify: no record missing"
"$tern" vm stop db0 --watch
echo "db0's data disk holds $(build/lab/tern-workload verify "$disk") valid records, none missing"

say "tern volume create -n shared -s 10G -N fabric (a shared NFS volume, RFD 26)"
"$tern" volume create -n shared -s 10G -N fabric --watch
say "two instances mount it: tern vm create -v shared:/shared (app0, app1)"
for a in app0 app1; do
    "$tern" vm create --alias "$a" --package lab-small --image lab-os --network fabric \
        -v shared:/shared --watch
done
"$tern" volume list
"$tern" volume get shared
mount_of() { # the instance's mount of /shared: <data root>/<vm>/mounts/shared
    "$tern" vm get "$1" -j | python3 -c '
import json, subprocess, sys
vm = json.load(sys.stdin)
srv = json.loads(subprocess.run([sys.argv[1], "server", "get", vm["server_uuid"], "-j"],
                                capture_output=True, text=True, check=True).stdout)
print("%s/%s/mounts/shared" % (srv["data_root"], vm["uuid"]))' "$tern"
}
say "app0 writes a file through its mount; app1 reads it through its own"
m0=$(mount_of app0)
m1=$(mount_of app1)
echo "written by app0 at $(date -u +%FT%TZ)" > "$m0/hello.txt"
echo "$m0 -> $(readlink "$m0")"
echo "$m1 -> $(readlink "$m1")"
echo "app1 reads: $(cat "$m1/hello.txt")"
cmp -s "$m0/hello.txt" "$m1/hello.txt" || { echo "run-example: app1 does not see app0's file" >&2; exit 1; }
say "tern volume delete shared: refused while instances use it"
if "$tern" volume delete shared --watch; then
    echo "run-example: a volume in use was deleted" >&2; exit 1
fi
say "app1 stopped, then its directory removed by hand; the NIC reconcile (RFD 58) of its server notices"
app1=$("$tern" vm get app1 -o uuid -H)
srv1=$("$tern" vm get app1 -o server_uuid -H)
"$tern" nic list --vm app1
# Stopped first: its workload's pid file goes with the directory, and a workload left
# running would be no one's to stop.
"$tern" vm stop app1 --watch >/dev/null
rm -rf "$(dirname "$(dirname "$m1")")"
job=$("$tern" job create net-reconcile -p server_uuid="$srv1" --target "/net-reconcile-$srv1")
"$tern" job watch "$job"
echo "what it changed (the reconcile step's result):"
"$tern" job get "$job" -j | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("chain_results") or []:
    if r.get("name") == "reconcile":
        print(json.dumps(r.get("result"), indent=1))'
state=$("$tern" vm get "$app1" -o state -H)
echo "app1 is now $state; its NICs: $("$tern" nic list --vm "$app1" -H | wc -l)"
[ "$state" = destroyed ] || { echo "run-example: the reconcile left app1 $state" >&2; exit 1; }
"$tern" volume get shared -o name,state,refs

say "tern vm create --alias mig0: two disks, a NIC, the shared volume, the writer workload"
"$tern" vm create --alias mig0 --package lab-small --image lab-os --network fabric \
    --disks '[{}, {"size": 8192}]' -v shared:/shared --metadata lab:workload=writer --watch
mig0=$("$tern" vm get mig0 -o uuid -H)
src=$("$tern" vm get mig0 -o server_uuid -H)
disks_of() { # each disk of mig0: slot, path, sha256 (of its data extents' content: the file)
    "$tern" vm get mig0 -j | python3 -c '
import json, sys
for d in json.load(sys.stdin)["disks"]:
    print(d["pci_slot"], d["path"])'
}
nics_before=$("$tern" nic list --vm mig0 -H -o mac,ip)
disk=$(disks_of | awk '$1 == "0:4:1" {print $2}')
wait_records 0
echo "mig0 runs on $("$tern" server get "$src" -o hostname -H); its writer has written $(records) records"
echo "its mount of shared reads: $(cat "$(mount_of mig0)/hello.txt")"

say "tern migration automatic mig0 -w: mig0 moves to another server while its writer writes (RFD 34)"
"$tern" migration automatic mig0 -w
dst=$("$tern" vm get mig0 -o server_uuid -H)
[ "$dst" != "$src" ] || { echo "run-example: mig0 is still on its source server" >&2; exit 1; }
"$tern" migration get mig0
say "mig0 on $("$tern" server get "$dst" -o hostname -H): its disks, NICs, volume and writer"
disks_of
nics_after=$("$tern" nic list --vm mig0 -H -o mac,ip)
echo "NICs before: $nics_before"
echo "NICs after:  $nics_after"
[ "$nics_before" = "$nics_after" ] || { echo "run-example: mig0's NICs changed" >&2; exit 1; }
echo "its mount of shared reads: $(cat "$(mount_of mig0)/hello.txt")"
"$tern" volume get shared -o name,state,refs
disk=$(disks_of | awk '$1 == "0:4:1" {print $2}')
n=$(records)
wait_records "$n"
echo "mig0's writer goes on on the target: $(records) records"
say "the source's copy, stopped and hidden until finalize: boot disks equal, data disk a prefix"
src_root=$("$tern" server get "$src" -o data_root -H)
src_boot="$src_root/$mig0/disks/disk0.img"
dst_boot=$(disks_of | awk '$1 == "0:4:0" {print $2}')
sha256sum "$src_boot" "$dst_boot" | sed "s#  # #"
[ "$(sha256sum < "$src_boot")" = "$(sha256sum < "$dst_boot")" ] || { echo "run-example: mig0's boot disks differ" >&2; exit 1; }
"$tern" vm stop mig0 --watch >/dev/null
kept=$(build/lab/tern-workload verify "$src_root/$mig0/disks/disk1.img")
now=$(build/lab/tern-workload verify "$disk")
echo "records on the source's copy at the switch: $kept; on the target now: $now, none missing"
[ "$now" -gt "$kept" ] || { echo "run-example: the target holds no record written after the switch" >&2; exit 1; }
say "tern migration finalize mig0: the source's copy removed"
"$tern" migration finalize mig0 -w
[ ! -e "$src_root/$mig0" ] || { echo "run-example: finalize left $src_root/$mig0" >&2; exit 1; }
"$tern" server list

say "tern vm delete web0"
"$tern" vm delete web0 --watch
say "tern vm list (web0 gone, its capacity and IP given back)"
"$tern" vm list
"$tern" server list
"$tern" network ips external

say "tools/lab down"
up=false
tools/lab down --dir "$lab"
