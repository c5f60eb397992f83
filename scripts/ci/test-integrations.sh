#!/usr/bin/env bash
# Lockbox as the store of the tools developers already use, judged by those tools themselves:
#
#   git     `lockbox git-credential` as credential.helper: the helper protocol directly, then
#           `git credential approve/fill/reject` round trips with the real git (credential.useHttpPath
#           included), then `git clone` over HTTP with basic auth from a loopback server
#           (scripts/ci/git-http-server.py: `git http-backend` as a CGI): the first clone asks (a test
#           askpass) and stores the password through the helper, the second clone asks nothing
#           (GIT_TERMINAL_PROMPT=0, no askpass) and no plain-text copy of the password exists
#           (no ~/.git-credentials, the password in no file under HOME or the XDG folders); a
#           password the server refuses is erased by git through the helper.
#   Python  keyring 25.7's own keyring.testing.backend.BackendBasicTests, plus interop tests,
#           against keyrings.lockbox (integrations/python-keyring), with pytest (results shown).
#   skopeo  `lockbox docker-credential` as docker-credential-lockbox, named by a credHelpers entry of
#           the auth file: `skopeo login` against a loopback docker-registry with basic auth
#           (htpasswd) stores the password through the helper and none in the auth file, `skopeo
#           copy` and `skopeo inspect` authenticate through it, `skopeo logout` erases it.
#   All     what they store is listed by `lockbox list --json` and removed by `lockbox wipe`.
#
# Each runs against a file vault unlocked by a key file (LOCKBOX_KEY_FILE), and, when this script
# runs inside scripts/dev/keyring-session.sh (LOCKBOX_TEST_KEYRING=unlocked), against that
# gnome-keyring too, chosen by lockbox itself (nothing named: `auto` finds the unlocked keyring).
# Outside such a session the Secret Service run is reported as not done; under CI=true or
# LOCKBOX_REQUIRE_KEYRING_TESTS=1 that is a failure.
#
# Usage: scripts/ci/test-integrations.sh [PATH_TO_LOCKBOX]   (default: the debug build)
# Installs git, python3-venv, skopeo, docker-registry and apache2-utils (htpasswd) if missing (apt), and keyring==25.7.0, pytest and wheel into
# .build-integrations/venv (PyPI).
# Runs detached from any terminal (setsid), so nothing can wait for typing; every git and pytest
# step is bounded by `timeout`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

if [[ -z ${LOCKBOX_INTEGRATIONS_DETACHED:-} ]] && { : </dev/tty; } 2>/dev/null; then
    LOCKBOX_INTEGRATIONS_DETACHED=1 exec setsid --wait "$0" "$@"
fi

lockbox_binary="${1:-$(swift build --show-bin-path)/lockbox}"
[[ -x $lockbox_binary ]] || { echo "test-integrations: no lockbox binary at $lockbox_binary (build first)" >&2; exit 1; }
lockbox_binary="$(cd "$(dirname "$lockbox_binary")" && pwd)/$(basename "$lockbox_binary")"

# ------------------------------------------------------------------ what the tests need --
# git (with git-http-backend) and a python3 that can make a venv (Debian's needs python3-venv).
missing=()
command -v git >/dev/null && [[ -x "$(git --exec-path)/git-http-backend" ]] || missing+=(git)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v docker-registry >/dev/null || missing+=(docker-registry)
command -v htpasswd >/dev/null || missing+=(apache2-utils)
if ((${#missing[@]})); then
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    echo "test-integrations: installing ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ------------------------------------------------------------------ Python environment --
venv="$root/.build-integrations/venv"
if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check keyring==25.7.0 pytest wheel
# The package as a user installs it (its keyring.backends entry point included), rebuilt each run.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
    --force-reinstall "$root/integrations/python-keyring"

# ------------------------------------------------------------------ helpers --
checks=0
fail() {
    echo "test-integrations: FAIL ($store): $*" >&2
    exit 1
}
pass() {
    checks=$((checks + 1))
    echo "  ok  $*"
}
# expect_equal WHAT ACTUAL EXPECTED
expect_equal() {
    [[ $2 == "$3" ]] || fail "$1: expected [$3], got [$2]"
    pass "$1"
}
# The JSON listing of one service as "account kind" lines.
listed() {
    lockbox list --json --service="$1" | "$venv/bin/python" -c '
import json, sys
for item in json.load(sys.stdin):
    print(item["account"], item["kind"])'
}

server_pid=''
stop_server() {
    if [[ -n $server_pid ]]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=''
    fi
}
work=''
cleanup() {
    stop_server
    if [[ -n $work ]]; then rm -rf -- "$work"; fi
}
trap cleanup EXIT
trap 'echo "test-integrations: FAIL (${store:-setup}): a command failed at line $LINENO" >&2' ERR

session_data_home="${XDG_DATA_HOME:-}"

# ------------------------------------------------------------------ one store --
run_store() {
    store=$1
    echo "test-integrations: $store"
    work=$(mktemp -d /tmp/lockbox-integrations.XXXXXX)
    mkdir -p "$work"/{home,bin,fixtures,srv}
    export HOME="$work/home" XDG_DATA_HOME="$work/home/.local/share" XDG_CONFIG_HOME="$work/home/.config"
    export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
    unset GIT_ASKPASS SSH_ASKPASS GIT_CONFIG_GLOBAL LOCKBOX_VAULT LOCKBOX_KEY_FILE LOCKBOX_BACKEND LOCKBOX_PROFILE
    # `lockbox` on PATH, and git-credential-lockbox beside it as git's naming rule wants.
    ln -s "$lockbox_binary" "$work/bin/lockbox"
    ln -s "$lockbox_binary" "$work/bin/git-credential-lockbox"
    ln -s "$lockbox_binary" "$work/bin/docker-credential-lockbox"
    export PATH="$work/bin:$PATH"
    export LOCKBOX_INTEGRATION_STORE=$store
    case $store in
        file)
            lockbox init --vault "$work/vault.lockbox" --generate-key-file "$work/vault.key" 2>/dev/null
            export LOCKBOX_VAULT="$work/vault.lockbox" LOCKBOX_KEY_FILE="$work/vault.key"
            ;;
        secret-service)
            # Nothing named: lockbox's own choice (auto) must pick the unlocked gnome-keyring, as on a
            # desktop; the secret-tool lookups below prove where the items went.
            ;;
    esac
    git config --global user.name test && git config --global user.email test@example.invalid
    git config --global init.defaultBranch main

    helper_protocol
    git_credential_round_trips
    git_clone_over_http
    python_keyring
    registry_login

    stop_server
    rm -rf -- "$work"
    work=''
}

# ------------------------------------------------------------------ the helper protocol --
helper_protocol() {
    local out
    out=$(printf 'protocol=https\nhost=proto.example.org\nusername=ann\npassword=p w=1\nwwwauth[]=Basic realm="x"\nfuture=attribute\n\n' |
        lockbox git-credential store)
    expect_equal "store is silent" "$out" ""
    out=$(printf 'protocol=https\nhost=proto.example.org\n\n' | lockbox git-credential get)
    expect_equal "get answers user name and password" "$out" $'username=ann\npassword=p w=1'
    if [[ $store == secret-service ]]; then
        expect_equal "lockbox chose gnome-keyring by itself (secret-tool finds the item)" \
            "$(secret-tool lookup service git:https://proto.example.org username ann)" "p w=1"
    fi
    out=$(printf 'protocol=https\nhost=other.example.org\n\n' | lockbox git-credential get)
    expect_equal "get without a match prints nothing (exit 0)" "$out" ""
    out=$(printf 'protocol=https\nhost=proto.example.org\n\n' | lockbox git-credential some-future-op)
    expect_equal "an unknown operation is ignored" "$out" ""
    out=$(printf 'protocol=https\nhost=proto.example.org\nusername=ann\npassword=not-it\n\n' | lockbox git-credential erase)
    expect_equal "erase is silent" "$out" ""
    expect_equal "erase with another password keeps the stored one" "$(listed git:https://proto.example.org)" "ann password"
    printf 'protocol=https\nhost=proto.example.org\nusername=old\npassword=gone\npassword_expiry_utc=1000\n\n' |
        lockbox git-credential store
    out=$(printf 'protocol=https\nhost=proto.example.org\nusername=old\n\n' | lockbox git-credential get)
    expect_equal "an expired password (password_expiry_utc) is not returned" "$out" ""
    printf 'protocol=https\nhost=proto.example.org\nusername=new\npassword=later\npassword_expiry_utc=4102444800\n\n' |
        lockbox git-credential store
    out=$(printf 'protocol=https\nhost=proto.example.org\nusername=new\n\n' | lockbox git-credential get)
    expect_equal "a future expiry is returned with the password" "$out" $'username=new\npassword=later\npassword_expiry_utc=4102444800'
    printf 'protocol=https\nhost=proto.example.org\nusername=oauth\npassword=access\noauth_refresh_token=refresh me\n\n' |
        lockbox git-credential store
    out=$(printf 'protocol=https\nhost=proto.example.org\nusername=oauth\n\n' | lockbox git-credential get)
    expect_equal "oauth_refresh_token is stored with the credential and returned (git 2.41+ protocol)" "$out" \
        $'username=oauth\npassword=access\noauth_refresh_token=refresh me'
    expect_equal "the refresh token is not listed as an item of its own" "$(listed git:https://proto.example.org | grep -c oauth)" "1"
    out=$(printf 'protocol=https\nhost=proto.example.org\n\n' | lockbox git-credential erase)
    expect_equal "erase without user name or password removes the host's credentials" "$(listed git:https://proto.example.org)" ""
    expect_equal "the refresh token was erased with its credential" \
        "$(lockbox list --json-lines | grep -c oauth-refresh-token || true)" "0"
}

# ------------------------------------------------------------------ git credential --
git_credential_round_trips() {
    local out status
    # The link form: credential.helper=lockbox runs git-credential-lockbox.
    git config --global credential.helper lockbox
    out=$(printf 'protocol=https\nhost=git.example.org\nusername=bob\npassword=pw with = and  spaces\n\n' |
        timeout 30 git credential approve)
    expect_equal "git credential approve (stores, prints nothing)" "$out" ""
    expect_equal "lockbox list shows it as git:https://git.example.org / bob" "$(listed git:https://git.example.org)" "bob password"
    out=$(printf 'protocol=https\nhost=git.example.org\n\n' | timeout 30 git credential fill)
    expect_equal "git credential fill returns it" "$out" \
        $'protocol=https\nhost=git.example.org\nusername=bob\npassword=pw with = and  spaces'

    # credential.useHttpPath: the path is part of the service; without it git drops the path.
    printf 'url=https://git.example.org/team/a.git\nusername=carol\npassword=for-a\n\n' |
        timeout 30 git -c credential.useHttpPath=true credential approve
    expect_equal "with useHttpPath the path is part of the service" \
        "$(listed git:https://git.example.org/team/a.git)" "carol password"
    out=$(printf 'url=https://git.example.org/team/a.git\n\n' | timeout 30 git -c credential.useHttpPath=true credential fill)
    expect_equal "fill with useHttpPath finds the path's credential" "$out" \
        $'protocol=https\nhost=git.example.org\npath=team/a.git\nusername=carol\npassword=for-a'
    status=0
    out=$(printf 'url=https://git.example.org/team/b.git\n\n' | timeout 30 git -c credential.useHttpPath=true credential fill 2>/dev/null) ||
        status=$?
    [[ $status -ne 0 && -z $out ]] || fail "fill for another path must find nothing (status $status, output [$out])"
    pass "fill with useHttpPath for another path finds nothing (git then fails: no prompt allowed)"
    out=$(printf 'url=https://git.example.org/team/b.git\n\n' | timeout 30 git credential fill)
    expect_equal "without useHttpPath git asks for the host's credential" "$out" \
        $'protocol=https\nhost=git.example.org\nusername=bob\npassword=pw with = and  spaces'

    out=$(printf 'protocol=https\nhost=git.example.org\nusername=bob\npassword=pw with = and  spaces\n\n' |
        timeout 30 git credential reject)
    expect_equal "git credential reject (erases, prints nothing)" "$out" ""
    expect_equal "reject removed it from lockbox" "$(listed git:https://git.example.org)" ""
    status=0
    printf 'protocol=https\nhost=git.example.org\n\n' | timeout 30 git credential fill >/dev/null 2>&1 || status=$?
    [[ $status -ne 0 ]] || fail "fill after reject must fail"
    pass "fill after reject finds nothing"

    printf 'protocol=https\nhost=git.example.org\nusername=dave\npassword=x\n\n' | timeout 30 git credential approve
    lockbox wipe --service git:https://git.example.org --yes 2>/dev/null
    status=0
    printf 'protocol=https\nhost=git.example.org\n\n' | timeout 30 git credential fill >/dev/null 2>&1 || status=$?
    [[ $status -ne 0 ]] || fail "fill after lockbox wipe must fail"
    pass "lockbox wipe --service removes git's credential"
    lockbox wipe --service git:https://git.example.org/team/a.git --yes 2>/dev/null
    git config --global --unset credential.helper
}

# ------------------------------------------------------------------ git clone over HTTP --
git_clone_over_http() {
    local user=alice password port deadline out before
    password="clone-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
    # The repository the server exports.
    git init --quiet "$work/srv/source"
    echo hello >"$work/srv/source/README"
    git -C "$work/srv/source" add README && git -C "$work/srv/source" commit --quiet -m first
    git clone --quiet --bare "$work/srv/source" "$work/srv/repo.git"
    # The askpass of the first clone answers like a user at a prompt, and records each question.
    printf '%s\n%s\n' "$user" "$password" >"$work/fixtures/answers"
    cat >"$work/fixtures/askpass" <<EOF
#!/bin/sh
echo "\$1" >>"$work/fixtures/askpass.log"
case "\$1" in
    Username*) sed -n 1p "$work/fixtures/answers" ;;
    Password*) sed -n 2p "$work/fixtures/answers" ;;
esac
EOF
    chmod +x "$work/fixtures/askpass"

    python3 "$root/scripts/ci/git-http-server.py" "$work/srv" "$work/fixtures/port" "$work/fixtures/server.log" \
        "$user:$(printf '%s' "$password" | sha256sum | cut -d' ' -f1)" &
    server_pid=$!
    deadline=$((SECONDS + 15))
    until [[ -s $work/fixtures/port ]]; do
        ((SECONDS < deadline)) || fail "the HTTP server did not start within 15 s"
        kill -0 "$server_pid" 2>/dev/null || fail "the HTTP server exited"
        sleep 0.1
    done
    port=$(cat "$work/fixtures/port")
    local url="http://127.0.0.1:$port/repo.git"
    local helper="!lockbox git-credential"

    GIT_ASKPASS="$work/fixtures/askpass" timeout 60 git -c credential.helper= -c "credential.helper=$helper" \
        clone --quiet "$url" "$work/home/first" || fail "the first clone failed"
    grep -q '^401 no-auth' "$work/fixtures/server.log" || fail "the server did not ask for authentication"
    expect_equal "first clone asked the user (askpass) for user name and password" \
        "$(cut -c1-8 "$work/fixtures/askpass.log" | tr '\n' ' ')" "Username Password "
    expect_equal "git stored the credential through the helper" "$(listed "git:http://127.0.0.1:$port")" "alice password"
    if [[ $store == secret-service ]]; then
        # Really in gnome-keyring, under the attributes secret-tool and Python keyring use too.
        expect_equal "the credential is in gnome-keyring (secret-tool lookup)" \
            "$(secret-tool lookup service "git:http://127.0.0.1:$port" username alice)" "$password"
    fi

    before=$(wc -l <"$work/fixtures/askpass.log")
    timeout 60 git -c credential.helper= -c "credential.helper=$helper" clone --quiet "$url" "$work/home/second" ||
        fail "the second clone failed (no prompt allowed: GIT_TERMINAL_PROMPT=0, no askpass)"
    expect_equal "second clone succeeded without asking" "$(wc -l <"$work/fixtures/askpass.log")" "$before"
    expect_equal "second clone has the files" "$(cat "$work/home/second/README")" "hello"
    grep -q "^200 alice GET /repo.git/info/refs" "$work/fixtures/server.log" || fail "no authenticated request in the server log"
    [[ ! -e $HOME/.git-credentials && ! -e $XDG_CONFIG_HOME/git/credentials ]] || fail "a plain-text credentials file was written"
    pass "no ~/.git-credentials or \$XDG_CONFIG_HOME/git/credentials"
    local searched=("$HOME")
    [[ -n $session_data_home && -d $session_data_home ]] && searched+=("$session_data_home")
    if grep -rqF -- "$password" "${searched[@]}"; then
        fail "the password is in plain text in: $(grep -rlF -- "$password" "${searched[@]}" | tr '\n' ' ')"
    fi
    pass "the password is in no file under HOME${session_data_home:+ or the data folder of gnome-keyring}"

    # A stored password the server refuses: git erases it through the helper, then fails (no prompt).
    printf 'protocol=http\nhost=127.0.0.1:%s\nusername=alice\npassword=stale\n\n' "$port" | lockbox git-credential store
    if timeout 60 git -c credential.helper= -c "credential.helper=$helper" clone --quiet "$url" "$work/home/third" 2>/dev/null; then
        fail "a clone with a refused password must fail when no prompt is allowed"
    fi
    expect_equal "a refused password is erased by git through the helper" "$(listed "git:http://127.0.0.1:$port")" ""
    stop_server
}

# ------------------------------------------------------------------ Python keyring --
python_keyring() {
    local status=0 out
    echo "  pytest: keyring 25.7 BackendBasicTests and interop tests against keyrings.lockbox ($store)"
    timeout 300 "$venv/bin/python" -m pytest -v -rxXs -p no:cacheprovider "$root/integrations/python-keyring/tests" || status=$?
    [[ $status -eq 0 ]] || fail "pytest failed (status $status)"
    pass "pytest (keyring BackendBasicTests and interop)"
    if [[ $store == file ]]; then
        # A server without a Secret Service: keyring itself must pick Lockbox, as pip/twine do.
        local no_bus=(env -u DBUS_SESSION_BUS_ADDRESS -u XDG_RUNTIME_DIR)
        out=$("${no_bus[@]}" "$venv/bin/keyring" --list-backends)
        [[ $out == *"keyrings.lockbox.LockboxKeyring (priority: 3)"* ]] || fail "keyring --list-backends lacks Lockbox: $out"
        pass "keyring --list-backends shows keyrings.lockbox.LockboxKeyring (priority: 3)"
        printf 'pypi-AgEI-token\n' | "${no_bus[@]}" timeout 30 "$venv/bin/keyring" set upload.pypi.org __token__
        expect_equal "keyring set (the CLI twine users run) stores in Lockbox" "$(listed upload.pypi.org)" "__token__ password"
        expect_equal "keyring get reads it back" \
            "$("${no_bus[@]}" timeout 30 "$venv/bin/keyring" get upload.pypi.org __token__)" "pypi-AgEI-token"
        lockbox wipe --service upload.pypi.org --yes 2>/dev/null
    fi
}

# ------------------------------------------------------------------ container registry --
registry_login() {
    local password='reg pass "é' auth="$work/auth.json" port registry out
    mkdir -p "$work/registry/data"
    htpasswd -Bbn ci "$password" >"$work/registry/htpasswd"
    port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    registry="127.0.0.1:$port"
    cat >"$work/registry/config.yml" <<EOF
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $work/registry/data}}
http: {addr: $registry}
auth: {htpasswd: {realm: lockbox-test, path: $work/registry/htpasswd}}
EOF
    stop_server
    docker-registry serve "$work/registry/config.yml" >"$work/registry/log" 2>&1 &
    server_pid=$!
    "$venv/bin/python" - "$registry" <<'EOF' || fail "the registry did not start: $(tail -5 "$work/registry/log")"
import sys, time, urllib.request, urllib.error
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://{sys.argv[1]}/v2/", timeout=1)
    except urllib.error.HTTPError as error:
        sys.exit(0 if error.code == 401 else 1)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
    # A one-layer OCI image to push.
    "$venv/bin/python" - "$work/image" <<'EOF'
import gzip, hashlib, io, json, os, sys, tarfile
root = sys.argv[1]
os.makedirs(f"{root}/blobs/sha256")
def blob(data):
    digest = hashlib.sha256(data).hexdigest()
    open(f"{root}/blobs/sha256/{digest}", "wb").write(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}
tar = io.BytesIO()
with tarfile.open(fileobj=tar, mode="w") as archive:
    info = tarfile.TarInfo("hello.txt"); info.size = 6; archive.addfile(info, io.BytesIO(b"hello\n"))
config = {"architecture": "amd64", "os": "linux", "config": {},
          "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(tar.getvalue()).hexdigest()]}}
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(json.dumps(config).encode())},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **blob(gzip.compress(tar.getvalue(), mtime=0))}]}
index = {"schemaVersion": 2, "manifests": [{"mediaType": manifest["mediaType"], **blob(json.dumps(manifest).encode()),
                                            "annotations": {"org.opencontainers.image.ref.name": "v1"}}]}
json.dump(index, open(f"{root}/index.json", "w"))
open(f"{root}/oci-layout", "w").write('{"imageLayoutVersion": "1.0.0"}')
EOF
    printf '{"credHelpers": {"%s": "lockbox"}}\n' "$registry" >"$auth"
    printf '%s' "$password" | timeout 60 skopeo login --authfile "$auth" --tls-verify=false --username ci --password-stdin "$registry" >/dev/null
    expect_equal "skopeo login stores the credential through docker-credential-lockbox" "$(listed "docker:$registry")" "ci password"
    ! grep -qF "$password" "$auth" || fail "the auth file holds the password: $(cat "$auth")"
    expect_equal "the auth file holds no credential, only the helper's name" "$(tr -d ' \n' <"$auth")" "{\"credHelpers\":{\"$registry\":\"lockbox\"}}"
    timeout 60 skopeo copy --quiet --dest-tls-verify=false --dest-authfile "$auth" "oci:$work/image:v1" "docker://$registry/team/hello:v1"
    pass "skopeo copy pushes with the helper's credential"
    out=$(timeout 60 skopeo inspect --authfile "$auth" --tls-verify=false "docker://$registry/team/hello:v1" |
        "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["Name"])')
    expect_equal "skopeo inspect authenticates with the helper's credential" "$out" "$registry/team/hello"
    printf '{}\n' >"$work/empty-auth.json"
    if timeout 60 skopeo inspect --authfile "$work/empty-auth.json" --tls-verify=false "docker://$registry/team/hello:v1" >/dev/null 2>&1; then
        fail "the registry answered without credentials"
    fi
    pass "without the helper the registry refuses (basic auth is required)"
    timeout 60 skopeo logout --authfile "$auth" "$registry" >/dev/null
    expect_equal "skopeo logout erases the credential through the helper" "$(listed "docker:$registry")" ""
    stop_server
}

# ------------------------------------------------------------------ run --
start=$SECONDS
run_store file
file_checks=$checks
secret_service="not run (not inside scripts/dev/keyring-session.sh)"
if [[ ${LOCKBOX_TEST_KEYRING:-} == unlocked ]]; then
    checks=0
    run_store secret-service
    secret_service="$checks checks passed"
elif [[ ${CI:-} == true || ${LOCKBOX_REQUIRE_KEYRING_TESTS:-} == 1 ]]; then
    store=secret-service
    fail "the Secret Service run is required here (CI or LOCKBOX_REQUIRE_KEYRING_TESTS) but no unlocked keyring session is set up; run inside scripts/dev/keyring-session.sh"
fi
echo "test-integrations: file vault: $file_checks checks passed; Secret Service: $secret_service ($((SECONDS - start)) s)"
