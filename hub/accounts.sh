#!/usr/bin/env bash
# The hub's system accounts, with known TEST passwords (a test machine only; docs/JUPYTERHUB.md
# says what a real hub does instead). Idempotent: an account that exists gets its home, shell,
# groups and password set again; nothing else on the machine is touched.
#
#   bash hub/accounts.sh STATE      homes under STATE/home/<name> (mode 700, owned by the user)
#
# prof-ada          instructor (hub admin), grades through the course's formgrader service
# ta-ben            teaching assistant: the formgrader service, not a hub admin
# alice bob carol   students
# grader-attention  the formgrader service's account: owns the course root and the gradebook;
#                   no password, no login, not a hub user
# make hub-stop locks the passwords again: they work only while the hub runs.
set -euo pipefail
STATE=${1:?usage: bash hub/accounts.sh STATE}
[[ $(id -u) -eq 0 ]] || { echo "accounts.sh: needs root (useradd, chpasswd)" >&2; exit 1; }
mkdir -p "$STATE/home"
chmod 755 "$STATE" "$STATE/home"
account() {  # name password
    local name=$1 password=$2 home="$STATE/home/$1"
    if id "$name" >/dev/null 2>&1; then
        usermod --home "$home" --shell /bin/bash "$name"
    else
        useradd --home-dir "$home" --no-create-home --shell /bin/bash --user-group "$name"
    fi
    mkdir -p "$home"
    chown "$name:$name" "$home"
    chmod 700 "$home"
    if [[ -n $password ]]; then
        echo "$name:$password" | chpasswd
    else
        usermod --lock "$name" >/dev/null
    fi
}
for name in prof-ada ta-ben alice bob carol; do
    account "$name" "$name-attention-2026"
done
account grader-attention ""
echo "accounts ready under $STATE/home: prof-ada (instructor) ta-ben (assistant) alice bob carol (students), grader-attention (formgrader service); password of each: <name>-attention-2026"
