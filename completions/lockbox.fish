function __lockbox_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __lockbox_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __lockbox_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __lockbox_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __lockbox_parse_tokens -S
    set -l unparsed_tokens (__lockbox_tokens -pc)
    switch $unparsed_tokens[1]
    case 'lockbox'
        __lockbox_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'init'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'generate-key-file=' 'with-passphrase' 'kdf=' 'format=' 'tpm' 'tpm-pcrs=' 'tpm-pin' 'tpm-new-pin-fd=' 'version' 'h/help'
        case 'set'
            __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'kind=' 'label=' 'attribute=+' 'raw' 'allow-empty' 'protected' 'version' 'h/help'
        case 'get'
            __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
        case 'delete'
            __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
        case 'list'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'service=' 'json' 'json-lines' 'version' 'h/help'
        case 'wipe'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'service=' 'all' 'yes' 'version' 'h/help'
        case 'passwd'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'new-passphrase-fd=' 'slot=' 'kdf=' 'version' 'h/help'
        case 'rotate-key'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'drop-unmatched-slots' 'version' 'h/help'
        case 'convert'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
        case 'slot'
            __lockbox_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'list'
                __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'json' 'version' 'h/help'
            case 'add-passphrase'
                __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'new-passphrase-fd=' 'kdf=' 'version' 'h/help'
            case 'add-key-file'
                __lockbox_parse_subcommand 1 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'generate' 'version' 'h/help'
            case 'add-tpm'
                __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'tpm-pcrs=' 'tpm-pin' 'tpm-new-pin-fd=' 'version' 'h/help'
            case 'remove'
                __lockbox_parse_subcommand 1 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
            end
        case 'pin'
            __lockbox_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'set'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'hash-cost=' 'alphanumeric' 'lockout-delays=' 'wipe-after=' 'wipe-item=+' 'disable-after=' 'version' 'h/help'
            case 'verify'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'hash-cost=' 'alphanumeric' 'version' 'h/help'
            case 'change'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'hash-cost=' 'alphanumeric' 'version' 'h/help'
            case 'remove'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'hash-cost=' 'alphanumeric' 'version' 'h/help'
            case 'status'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'hash-cost=' 'alphanumeric' 'json' 'version' 'h/help'
            case 'reset'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'hash-cost=' 'alphanumeric' 'by=' 'version' 'h/help'
            case 'calibrate'
                __lockbox_parse_subcommand 0 'target=' 'memory=' 'version' 'h/help'
            end
        case 'unlock'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'for=' 'pin=' 'version' 'h/help'
        case 'lock'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
        case 'status'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'json' 'version' 'h/help'
        case 'token'
            __lockbox_parse_subcommand 0 'version' 'h/help'
            switch $unparsed_tokens[1]
            case 'set'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'subject=' 'version' 'h/help'
            case 'get'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'field=' 'json' 'refresh-with=' 'leeway=' 'version' 'h/help'
            case 'status'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'json' 'version' 'h/help'
            case 'clear'
                __lockbox_parse_subcommand 2 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
            end
        case 'device-id'
            __lockbox_parse_subcommand 1 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'account=' 'reset' 'version' 'h/help'
        case 'signout'
            __lockbox_parse_subcommand 1 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'keep-device-id' 'version' 'h/help'
        case 'migrate'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'from=' 'to=' 'service=' 'all' 'move' 'on-conflict=' 'json' 'version' 'h/help'
        case 'export'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'to=' 'service=' 'backup-passphrase-fd=' 'kdf=' 'version' 'h/help'
        case 'import'
            __lockbox_parse_subcommand 1 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'json-lines' 'backup-passphrase-fd=' 'on-conflict=' 'json' 'version' 'h/help'
        case 'doctor'
            __lockbox_parse_subcommand 0 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'json' 'version' 'h/help'
        case 'selftest'
            __lockbox_parse_subcommand 0 'json' 'vectors=' 'version' 'h/help'
        case 'git-credential'
            __lockbox_parse_subcommand 1 'store=' 'postgres-url-file=' 'profile=' 'vault=' 'key-file=' 'passphrase-fd=' 'tpm-pin-fd=' 'version' 'h/help'
        case 'help'
            __lockbox_parse_subcommand -r 1 'version'
        end
    end
end

function __lockbox_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __lockbox_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __lockbox_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __lockbox_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__lockbox_tokens -p)
    if test -z "$(__lockbox_tokens -t)"
        set -l index (count (__lockbox_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'lockbox' -f
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'init' -d 'Create a new, empty vault.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'set' -d 'Store a secret read from standard input.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'get' -d 'Print a secret, and nothing else, to standard output.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'delete' -d 'Remove one item.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'list' -d 'List items: metadata only, never secrets.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'wipe' -d 'Remove every item of one service, or of the whole vault.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'passwd' -d 'Change the vault\'s passphrase.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'rotate-key' -d 'Replace the vault\'s data key and re-encrypt everything under the new one.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'convert' -d 'Convert a format-1 vault to format 2 (sealed rows in SQLite), in place.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'slot' -d 'List, add and remove key slots.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'pin' -d 'PINs for PIN profiles (a person of an app, e.g. kids max): Argon2id hashes in the store, with lockout after wrong tries.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'unlock' -d 'Prove who you are once (PIN or passphrase); protected items then open without asking until the window ends.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'lock' -d 'Close the re-authentication window now.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'status' -d 'Show whether a re-authentication window is open, and for how long.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'token' -d 'OAuth token sets: store, read, refresh once across processes, clear.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'device-id' -d 'Print the service\'s stable device ID, creating it on first use (one, even under concurrent first calls).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'signout' -d 'Clear everything a service stored: tokens, PINs, protected items, device ID (unless --keep-device-id).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'migrate' -d 'Copy items between the file vault, the Secret Service and PostgreSQL, verifying each copy.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'export' -d 'Write an encrypted backup: a vault file with its own passphrase (same format as the vault).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'import' -d 'Restore items from a backup made with `lockbox export`, reporting every conflict; or store JSON lines in one batch.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'doctor' -d 'Check which store is configured and whether each part works, with the fix for each problem.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'selftest' -d 'Run the known-answer vectors inside this binary: Argon2id, XChaCha20-Poly1305, BLAKE2b, Lockbox vault files, and the Secret Service session\'s HKDF-SHA-256, AES-128-CBC and 1024-bit MODP Diffie-Hellman.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'git-credential' -d 'Be git\'s credential helper: get, store or erase the credential git describes on standard input.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" generate-key-file' -l 'generate-key-file' -d 'Create a new key file here (32 random bytes, mode 0600) and add a slot for it.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" with-passphrase' -l 'with-passphrase' -d 'Also add a passphrase slot, asked on the terminal, when a key file is given.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" kdf' -l 'kdf' -d 'Argon2id cost for the passphrase slot.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" format' -l 'format' -d 'Vault format: 1 (one encrypted file) or 2 (sealed rows in SQLite; docs/FORMAT.md section 18).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" tpm' -l 'tpm' -d 'Also add a TPM2 slot, so the vault opens on this machine without a passphrase (a passphrase or key-file slot is still made, as recovery).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" tpm-pcrs' -l 'tpm-pcrs' -d 'Bind the TPM slot to these SHA-256 PCRs (comma-separated, e.g. 7 for the Secure Boot state). After a change to them (firmware, boot loader, kernel, Secure Boot keys) the slot refuses; open with a recovery slot and add it again. Default: none.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" tpm-pin' -l 'tpm-pin' -d 'Protect the TPM slot with a PIN (4 to 12 digits, checked by the PIN policy as for `pin set`), asked twice on the terminal; the TPM counts wrong PINs and locks out.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" tpm-new-pin-fd' -l 'tpm-new-pin-fd' -d 'Read the new TPM slot\'s PIN from this file descriptor (implies --tpm-pin).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox init" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" kind' -l 'kind' -d 'What the item holds: generic, password, token, device-id, pin-hash, or your own.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" label' -l 'label' -d 'A human-readable label. Default: Password for \'ACCOUNT\' on \'SERVICE\'.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set"' -l 'attribute' -d 'An extra non-secret attribute; repeatable.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" raw' -l 'raw' -d 'Store standard input byte for byte, trailing newline included.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" allow-empty' -l 'allow-empty' -d 'Store an empty secret when standard input is empty (a prompt on a terminal still refuses one).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" protected' -l 'protected' -d 'Readable only inside a re-authentication window (`lockbox unlock`), like user-presence access control.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox set" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox get" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox delete" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" service' -l 'service' -d 'Only this service\'s items.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" json' -l 'json' -d 'Print a JSON array instead of a table.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" json-lines' -l 'json-lines' -d 'Print one JSON object per line as each item is read, unsorted: on a format-2 vault, memory does not grow with the item count.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" service' -l 'service' -d 'Remove this service\'s items.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" all' -l 'all' -d 'Remove every item in the vault.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" yes' -l 'yes' -d 'Do not ask for confirmation.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox wipe" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" new-passphrase-fd' -l 'new-passphrase-fd' -d 'Read the new passphrase from this file descriptor.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" slot' -l 'slot' -d 'Which passphrase slot to change, when there are several (see `lockbox slot list`).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" kdf' -l 'kdf' -d 'Argon2id cost for the new passphrase.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox passwd" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" drop-unmatched-slots' -l 'drop-unmatched-slots' -d 'Remove key slots that none of the given credentials opens.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox rotate-key" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox convert" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox slot" -eq 1' -fa 'list' -d 'Show the vault\'s key slots.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox slot" -eq 1' -fa 'add-passphrase' -d 'Add a passphrase slot (unlock with an existing credential first).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox slot" -eq 1' -fa 'add-key-file' -d 'Add a key-file slot (unlock with an existing credential first).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox slot" -eq 1' -fa 'add-tpm' -d 'Add a TPM2 slot: the vault then opens on this machine without a passphrase (unlock with an existing credential first).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox slot" -eq 1' -fa 'remove' -d 'Remove a key slot; the last one cannot be removed.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" json' -l 'json' -d 'Print a JSON array (index, kind, kdf, openedThisHandle) instead of lines.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot list" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" new-passphrase-fd' -l 'new-passphrase-fd' -d 'Read the new passphrase from this file descriptor.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" kdf' -l 'kdf' -d 'Argon2id cost for the new slot.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-passphrase" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox slot add-key-file" -eq 1' -F
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" generate' -l 'generate' -d 'Create the key file (32 random bytes, mode 0600) instead of using an existing one.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-key-file" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" tpm-pcrs' -l 'tpm-pcrs' -d 'Bind the TPM slot to these SHA-256 PCRs (comma-separated, e.g. 7 for the Secure Boot state). After a change to them (firmware, boot loader, kernel, Secure Boot keys) the slot refuses; open with a recovery slot and add it again. Default: none.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" tpm-pin' -l 'tpm-pin' -d 'Protect the TPM slot with a PIN (4 to 12 digits, checked by the PIN policy as for `pin set`), asked twice on the terminal; the TPM counts wrong PINs and locks out.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" tpm-new-pin-fd' -l 'tpm-new-pin-fd' -d 'Read the new TPM slot\'s PIN from this file descriptor (implies --tpm-pin).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot add-tpm" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox slot remove" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'set' -d 'Set the PIN of a PIN profile that has none (asked twice).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'verify' -d 'Check a PIN (exit 0 if right).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'change' -d 'Change a PIN: the old one, then the new one twice.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'remove' -d 'Remove a PIN profile\'s PIN and its counters.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'status' -d 'Failures and lockout of a PIN profile; nothing secret.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'reset' -d 'Clear failures and re-enable a disabled PIN, on a higher authority\'s word.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox pin" -eq 1' -fa 'calibrate' -d 'Measure Argon2id here and suggest PIN hash parameters for a target time.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" hash-cost' -l 'hash-cost' -d 'Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" alphanumeric' -l 'alphanumeric' -d 'Allow letters and symbols (a passcode), not only digits.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" lockout-delays' -l 'lockout-delays' -d 'Seconds locked after the 1st, 2nd, … consecutive failure; the last repeats. Default: 0,0,0,0,60,300,900,900,3600.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" wipe-after' -l 'wipe-after' -d 'Wipe the PIN (and --wipe-item accounts) after this many consecutive failures. Off by default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set"' -l 'wipe-item' -d 'An account of the same service to wipe with the PIN; repeatable.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" disable-after' -l 'disable-after' -d 'Disable the PIN after this many consecutive failures (at most 100).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin set" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" hash-cost' -l 'hash-cost' -d 'Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" alphanumeric' -l 'alphanumeric' -d 'Allow letters and symbols (a passcode), not only digits.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin verify" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" hash-cost' -l 'hash-cost' -d 'Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" alphanumeric' -l 'alphanumeric' -d 'Allow letters and symbols (a passcode), not only digits.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin change" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" hash-cost' -l 'hash-cost' -d 'Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" alphanumeric' -l 'alphanumeric' -d 'Allow letters and symbols (a passcode), not only digits.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin remove" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" hash-cost' -l 'hash-cost' -d 'Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" alphanumeric' -l 'alphanumeric' -d 'Allow letters and symbols (a passcode), not only digits.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" json' -l 'json' -d 'Print JSON.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" hash-cost' -l 'hash-cost' -d 'Argon2id cost for new hashes; an older hash is upgraded on the next successful verify.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" alphanumeric' -l 'alphanumeric' -d 'Allow letters and symbols (a passcode), not only digits.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" by' -l 'by' -d 'Another PIN profile of the same service whose PIN authorises the reset.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin reset" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin calibrate" target' -l 'target' -d 'Seconds one verification should take.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin calibrate" memory' -l 'memory' -d 'Memory in MiB (at least 64).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin calibrate" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox pin calibrate" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" for' -l 'for' -d 'How long the window stays open: 30s, 10m, 1h. Default: 5m.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" pin' -l 'pin' -d 'Open the window with this profile\'s PIN instead of the passphrase.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox unlock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox lock" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" json' -l 'json' -d 'Print JSON: open, remainingSeconds, openedBy.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox token" -eq 1' -fa 'set' -d 'Store a token set from an OAuth 2.0 token response (RFC 6749 §5.1 JSON) on standard input.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox token" -eq 1' -fa 'get' -d 'Print a token. With --refresh-with, an expired access token is refreshed first — once, however many processes ask.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox token" -eq 1' -fa 'status' -d 'When the access token expires; never a token.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox token" -eq 1' -fa 'clear' -d 'Remove a token set.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" subject' -l 'subject' -d 'The user the session belongs to.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token set" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" field' -l 'field' -d 'Which token: access or refresh.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" json' -l 'json' -d 'Print the whole token set as JSON (tokens included).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" refresh-with' -l 'refresh-with' -d 'A command that refreshes the tokens (it is described in this command\'s help).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" leeway' -l 'leeway' -d 'Seconds before expiry that a token counts as expired.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token get" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" json' -l 'json' -d 'Print JSON: expiresAt, expiresInSeconds (negative once expired), refreshToken (stored or not), tokenType, scope, subject.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox token clear" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" account' -l 'account' -d 'Another account for the ID, e.g. guest:alice.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" reset' -l 'reset' -d 'Make a new ID.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox device-id" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" keep-device-id' -l 'keep-device-id' -d 'Keep the device ID.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox signout" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" from' -l 'from' -d 'Where the items are now: file, secret-service or postgres.' -rfka 'file secret-service postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" to' -l 'to' -d 'Where they go: file, secret-service or postgres.' -rfka 'file secret-service postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" service' -l 'service' -d 'Only this service\'s items.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" all' -l 'all' -d 'Every Lockbox item (required when no --service is given).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" move' -l 'move' -d 'Remove each source item once its copy is verified.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" on-conflict' -l 'on-conflict' -d 'When the destination has a different item at the same address: skip, overwrite, or keep-both.' -rfka 'skip overwrite keep-both'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" json' -l 'json' -d 'Print what happened to each item as JSON (copied, alreadyPresent, conflictsSkipped, overwritten, keptBoth, removedFromSource).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox migrate" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" to' -l 'to' -d 'The backup file to create (refuses to overwrite).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" service' -l 'service' -d 'Only this service\'s items.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" backup-passphrase-fd' -l 'backup-passphrase-fd' -d 'Read the backup\'s passphrase from this descriptor (else asked twice).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" kdf' -l 'kdf' -d 'Argon2id cost for the backup\'s passphrase.' -rfka 'interactive moderate sensitive'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox export" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_positional "lockbox import" -eq 1' -F
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" json-lines' -l 'json-lines' -d 'Read FILE as JSON lines of items instead of a backup vault.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" backup-passphrase-fd' -l 'backup-passphrase-fd' -d 'Read the backup\'s passphrase from this descriptor (else asked).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" on-conflict' -l 'on-conflict' -d 'When an item exists with different contents: skip, overwrite, or keep-both.' -rfka 'skip overwrite keep-both'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" json' -l 'json' -d 'Print what happened to each item as JSON (copied, alreadyPresent, conflictsSkipped, overwritten, keptBoth).'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox import" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" json' -l 'json' -d 'Print the report as JSON.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox doctor" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox selftest" json' -l 'json' -d 'Print the results as JSON.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox selftest" vectors' -l 'vectors' -d 'Read the vector files (*.json) from this folder instead of the built-in copy.' -rfa '(__lockbox_complete_directories)'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox selftest" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox selftest" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" store' -l 'store' -d 'Where credentials live: auto (the store recorded for this profile; else the Secret Service when it is reachable and unlocked; else the file vault), secret-service, file, or postgres (a vault in PostgreSQL: see --postgres-url-file). Default: $LOCKBOX_STORE, else auto. Giving --vault, --key-file or --passphrase-fd (or their variables) means file unless postgres is named.' -rfka 'auto secret-service file postgres'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" postgres-url-file' -l 'postgres-url-file' -d 'With --store postgres: the file (mode 0600) whose first line is the database URL, postgresql://USER:PASSWORD@HOST:PORT/DATABASE. Default: $LOCKBOX_POSTGRES_URL_FILE, else the URL in $LOCKBOX_POSTGRES_URL. Never the URL itself: it holds a password.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" profile' -l 'profile' -d 'The profile whose store choice is recorded in the settings file. Default: $LOCKBOX_PROFILE, else default.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" vault' -l 'vault' -d 'The vault file. Default: $LOCKBOX_VAULT, else $XDG_DATA_HOME/lockbox/vault.lockbox (~/.local/share/lockbox/vault.lockbox).' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" key-file' -l 'key-file' -d 'Unlock with this key file (32 bytes, or 64 hex digits; mode 0600). Default: $LOCKBOX_KEY_FILE.' -rF
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" passphrase-fd' -l 'passphrase-fd' -d 'Read the passphrase from this open file descriptor (up to the first newline), e.g. 3 with `3< file`.' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" tpm-pin-fd' -l 'tpm-pin-fd' -d 'Read the PIN of the vault\'s TPM2 slot from this open file descriptor (else it is asked on the terminal).' -rfka ''
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" version' -l 'version' -d 'Show the version.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox git-credential" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'lockbox' -n '__lockbox_should_offer_completions_for_flags_or_options "lockbox help" version' -l 'version' -d 'Show the version.'
