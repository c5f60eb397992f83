#!/bin/bash

__lockbox_cursor_index_in_current_word() {
    local remaining="${COMP_LINE}"

    local word
    for word in "${COMP_WORDS[@]::COMP_CWORD}"; do
        remaining="${remaining##*([[:space:]])"${word}"*([[:space:]])}"
    done

    local -ir index="$((COMP_POINT - ${#COMP_LINE} + ${#remaining}))"
    if [[ "${index}" -le 0 ]]; then
        printf 0
    else
        printf %s "${index}"
    fi
}

# positional arguments:
#
# - 1: the current (sub)command's count of positional arguments
#
# required variables:
#
# - repeating_flags: the repeating flags that the current (sub)command can accept
# - non_repeating_flags: the non-repeating flags that the current (sub)command can accept
# - repeating_options: the repeating options that the current (sub)command can accept
# - non_repeating_options: the non-repeating options that the current (sub)command can accept
# - positional_number: value ignored
# - unparsed_words: unparsed words from the current command line
#
# modified variables:
#
# - non_repeating_flags: remove flags for this (sub)command that are already on the command line
# - non_repeating_options: remove options for this (sub)command that are already on the command line
# - positional_number: set to the current positional number
# - unparsed_words: remove all flags, options, and option values for this (sub)command
__lockbox_offer_flags_options() {
    local -ir positional_count="${1}"
    positional_number=0

    local was_flag_option_terminator_seen=false
    local is_parsing_option_value=false

    local -ar unparsed_word_indices=("${!unparsed_words[@]}")
    local -i word_index
    for word_index in "${unparsed_word_indices[@]}"; do
        if "${is_parsing_option_value}"; then
            # This word is an option value:
            # Reset marker for next word iff not currently the last word
            [[ "${word_index}" -ne "${unparsed_word_indices[${#unparsed_word_indices[@]} - 1]}" ]] && is_parsing_option_value=false
            unset "unparsed_words[${word_index}]"
            # Do not process this word as a flag or an option
            continue
        fi

        local word="${unparsed_words["${word_index}"]}"
        if ! "${was_flag_option_terminator_seen}"; then
            case "${word}" in
            --)
                unset "unparsed_words[${word_index}]"
                # by itself -- is a flag/option terminator, but if it is the last word, it is the start of a completion
                if [[ "${word_index}" -ne "${unparsed_word_indices[${#unparsed_word_indices[@]} - 1]}" ]]; then
                    was_flag_option_terminator_seen=true
                fi
                continue
                ;;
            -*)
                # ${word} is a flag or an option
                # If ${word} is an option, mark that the next word to be parsed is an option value
                local option
                for option in "${repeating_options[@]}" "${non_repeating_options[@]}"; do
                    [[ "${word}" = "${option}" ]] && is_parsing_option_value=true && break
                done

                # Remove ${word} from ${non_repeating_flags} or ${non_repeating_options} so it isn't offered again
                local not_found=true
                local -i index
                for index in "${!non_repeating_flags[@]}"; do
                    if [[ "${non_repeating_flags[${index}]}" = "${word}" ]]; then
                        unset "non_repeating_flags[${index}]"
                        non_repeating_flags=("${non_repeating_flags[@]}")
                        not_found=false
                        break
                    fi
                done
                if "${not_found}"; then
                    for index in "${!non_repeating_flags[@]}"; do
                        if [[ "${non_repeating_flags[${index}]}" = "${word}" ]]; then
                            unset "non_repeating_flags[${index}]"
                            non_repeating_flags=("${non_repeating_flags[@]}")
                            break
                        fi
                    done
                fi
                unset "unparsed_words[${word_index}]"
                continue
                ;;
            esac
        fi

        # ${word} is neither a flag, nor an option, nor an option value
        if [[ "${positional_number}" -lt "${positional_count}" || "${positional_count}" -lt 0 ]]; then
            # ${word} is a positional
            ((positional_number++))
            unset "unparsed_words[${word_index}]"
        else
            if [[ -z "${word}" ]]; then
                # Could be completing a flag, option, or subcommand
                positional_number=-1
            else
                # ${word} is a subcommand or invalid, so stop processing this (sub)command
                positional_number=-2
            fi
            break
        fi
    done

    unparsed_words=("${unparsed_words[@]}")

    if\
        ! "${was_flag_option_terminator_seen}"\
        && ! "${is_parsing_option_value}"\
        && [[ ("${cur}" = -* && "${positional_number}" -ge 0) || "${positional_number}" -eq -1 ]]
    then
        COMPREPLY+=($(compgen -W "${repeating_flags[*]} ${non_repeating_flags[*]} ${repeating_options[*]} ${non_repeating_options[*]}" -- "${cur}"))
    fi
}

__lockbox_add_completions() {
    local completion
    while IFS='' read -r completion; do
        COMPREPLY+=("${completion}")
    done < <(IFS=$'\n' compgen "${@}" -- "${cur}")
}

__lockbox_custom_complete() {
    if [[ -n "${cur}" || -z ${COMP_WORDS[${COMP_CWORD}]} || "${COMP_LINE:${COMP_POINT}:1}" != ' ' ]]; then
        local -ar words=("${COMP_WORDS[@]}")
    else
        local -ar words=("${COMP_WORDS[@]::${COMP_CWORD}}" '' "${COMP_WORDS[@]:${COMP_CWORD}}")
    fi

    "${COMP_WORDS[0]}" "${@}" "${words[@]}"
}

_lockbox() {
    local state
    state="$(shopt -p;shopt -po)"
    trap "${state//$'\n'/;}" RETURN
    shopt -s extglob
    set +o history +o posix

    local -xr SAP_SHELL=bash
    local -x SAP_SHELL_VERSION
    SAP_SHELL_VERSION="$(IFS='.';printf %s "${BASH_VERSINFO[*]}")"
    local -r SAP_SHELL_VERSION

    local -r cur="${2}"
    local -r prev="${3}"

    local -i positional_number
    local -a unparsed_words=("${COMP_WORDS[@]:1:${COMP_CWORD}}")

    local -a repeating_flags=()
    local -a non_repeating_flags=(--version -h --help)
    local -a repeating_options=()
    local -a non_repeating_options=()
    __lockbox_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    init|set|get|delete|list|wipe|restore|passwd|rotate-key|convert|slot|pin|unlock|lock|status|token|device-id|signout|migrate|export|import|doctor|selftest|exec|git-credential|docker-credential|exit-codes|help)
        # Offer subcommand argument completions
        "_lockbox_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'init set get delete list wipe restore passwd rotate-key convert slot pin unlock lock status token device-id signout migrate export import doctor selftest exec git-credential docker-credential exit-codes help' -- "${cur}"))
        ;;
    esac
}

_lockbox_init() {
    repeating_flags=()
    non_repeating_flags=(--with-passphrase --tpm --tpm-pin --allow-weak-passphrase --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --generate-key-file --kdf --format --tpm-pcrs --tpm-new-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--generate-key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--kdf')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    '--format')
        return
        ;;
    '--tpm-pcrs')
        return
        ;;
    '--tpm-new-pin-fd')
        return
        ;;
    esac
}

_lockbox_set() {
    repeating_flags=()
    non_repeating_flags=(--raw --allow-empty --protected --no-protected --no-clobber --keep-previous --version -h --help)
    repeating_options=(--attribute)
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --kind --label --if-current-fd --expires --grace)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--kind')
        return
        ;;
    '--label')
        return
        ;;
    '--attribute')
        return
        ;;
    '--if-current-fd')
        return
        ;;
    '--expires')
        return
        ;;
    '--grace')
        return
        ;;
    esac
}

_lockbox_get() {
    repeating_flags=()
    non_repeating_flags=(--allow-expired --previous --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_delete() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_list() {
    repeating_flags=()
    non_repeating_flags=(--json --json-lines --expired --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --service)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--service')
        return
        ;;
    esac
}

_lockbox_wipe() {
    repeating_flags=()
    non_repeating_flags=(--all --expired --yes --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --service)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--service')
        return
        ;;
    esac
}

_lockbox_restore() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --grace)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--grace')
        return
        ;;
    esac
}

_lockbox_passwd() {
    repeating_flags=()
    non_repeating_flags=(--allow-weak-passphrase --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --new-passphrase-fd --slot --kdf)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--new-passphrase-fd')
        return
        ;;
    '--slot')
        return
        ;;
    '--kdf')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_rotate-key() {
    repeating_flags=()
    non_repeating_flags=(--drop-unmatched-slots --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_convert() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_slot() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __lockbox_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    list|add-passphrase|add-key-file|add-tpm|remove|fingerprint)
        # Offer subcommand argument completions
        "_lockbox_slot_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'list add-passphrase add-key-file add-tpm remove fingerprint' -- "${cur}"))
        ;;
    esac
}

_lockbox_slot_list() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_slot_add-passphrase() {
    repeating_flags=()
    non_repeating_flags=(--allow-weak-passphrase --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --new-passphrase-fd --kdf)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--new-passphrase-fd')
        return
        ;;
    '--kdf')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_slot_add-key-file() {
    repeating_flags=()
    non_repeating_flags=(--generate --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac

    # Offer positional completions
    case "${positional_number}" in
    1)
        __lockbox_add_completions -f
        return
        ;;
    esac
}

_lockbox_slot_add-tpm() {
    repeating_flags=()
    non_repeating_flags=(--tpm-pin --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --tpm-pcrs --tpm-new-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--tpm-pcrs')
        return
        ;;
    '--tpm-new-pin-fd')
        return
        ;;
    esac
}

_lockbox_slot_remove() {
    repeating_flags=()
    non_repeating_flags=(--force --yes --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_slot_fingerprint() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=()
    __lockbox_offer_flags_options 1

    # Offer positional completions
    case "${positional_number}" in
    1)
        __lockbox_add_completions -f
        return
        ;;
    esac
}

_lockbox_pin() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __lockbox_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    set|verify|change|remove|status|reset|calibrate)
        # Offer subcommand argument completions
        "_lockbox_pin_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'set verify change remove status reset calibrate' -- "${cur}"))
        ;;
    esac
}

_lockbox_pin_set() {
    repeating_flags=()
    non_repeating_flags=(--alphanumeric --version -h --help)
    repeating_options=(--wipe-item)
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --hash-cost --lockout-delays --wipe-after --disable-after)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--hash-cost')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    '--lockout-delays')
        return
        ;;
    '--wipe-after')
        return
        ;;
    '--wipe-item')
        return
        ;;
    '--disable-after')
        return
        ;;
    esac
}

_lockbox_pin_verify() {
    repeating_flags=()
    non_repeating_flags=(--alphanumeric --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --hash-cost)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--hash-cost')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_pin_change() {
    repeating_flags=()
    non_repeating_flags=(--alphanumeric --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --hash-cost)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--hash-cost')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_pin_remove() {
    repeating_flags=()
    non_repeating_flags=(--alphanumeric --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --hash-cost)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--hash-cost')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_pin_status() {
    repeating_flags=()
    non_repeating_flags=(--alphanumeric --json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --hash-cost)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--hash-cost')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_pin_reset() {
    repeating_flags=()
    non_repeating_flags=(--alphanumeric --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --hash-cost --by)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--hash-cost')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    '--by')
        return
        ;;
    esac
}

_lockbox_pin_calibrate() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--target --memory)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--target')
        return
        ;;
    '--memory')
        return
        ;;
    esac
}

_lockbox_unlock() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --for --pin)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--for')
        return
        ;;
    '--pin')
        return
        ;;
    esac
}

_lockbox_lock() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_status() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_token() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __lockbox_offer_flags_options 0

    # Offer subcommand / subcommand argument completions
    local -r subcommand="${unparsed_words[0]}"
    unset 'unparsed_words[0]'
    unparsed_words=("${unparsed_words[@]}")
    case "${subcommand}" in
    set|get|status|clear)
        # Offer subcommand argument completions
        "_lockbox_token_${subcommand}"
        ;;
    *)
        # Offer subcommand completions
        COMPREPLY+=($(compgen -W 'set get status clear' -- "${cur}"))
        ;;
    esac
}

_lockbox_token_set() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --subject)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--subject')
        return
        ;;
    esac
}

_lockbox_token_get() {
    repeating_flags=()
    non_repeating_flags=(--json --allow-expired --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --field --refresh-with --leeway)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--field')
        return
        ;;
    '--refresh-with')
        return
        ;;
    '--leeway')
        return
        ;;
    esac
}

_lockbox_token_status() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_token_clear() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 2

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_device-id() {
    repeating_flags=()
    non_repeating_flags=(--reset --yes --json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --account)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--account')
        return
        ;;
    esac
}

_lockbox_signout() {
    repeating_flags=()
    non_repeating_flags=(--keep-device-id --yes --json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_migrate() {
    repeating_flags=()
    non_repeating_flags=(--all --move --json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --from --to --service --on-conflict)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--from')
        __lockbox_add_completions -W 'file'$'\n''secret-service'$'\n''postgres'
        return
        ;;
    '--to')
        __lockbox_add_completions -W 'file'$'\n''secret-service'$'\n''postgres'
        return
        ;;
    '--service')
        return
        ;;
    '--on-conflict')
        __lockbox_add_completions -W 'skip'$'\n''overwrite'$'\n''keep-both'
        return
        ;;
    esac
}

_lockbox_export() {
    repeating_flags=()
    non_repeating_flags=(--allow-weak-passphrase --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --to --service --backup-passphrase-fd --kdf)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--to')
        __lockbox_add_completions -f
        return
        ;;
    '--service')
        return
        ;;
    '--backup-passphrase-fd')
        return
        ;;
    '--kdf')
        __lockbox_add_completions -W 'interactive'$'\n''moderate'$'\n''sensitive'
        return
        ;;
    esac
}

_lockbox_import() {
    repeating_flags=()
    non_repeating_flags=(--json-lines --json --yes --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd --backup-passphrase-fd --on-conflict)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--backup-passphrase-fd')
        return
        ;;
    '--on-conflict')
        __lockbox_add_completions -W 'skip'$'\n''overwrite'$'\n''keep-both'
        return
        ;;
    esac

    # Offer positional completions
    case "${positional_number}" in
    1)
        __lockbox_add_completions -f
        return
        ;;
    esac
}

_lockbox_doctor() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_selftest() {
    repeating_flags=()
    non_repeating_flags=(--json --version -h --help)
    repeating_options=()
    non_repeating_options=(--vectors)
    __lockbox_offer_flags_options 0

    # Offer option value completions
    case "${prev}" in
    '--vectors')
        __lockbox_add_completions -d
        return
        ;;
    esac
}

_lockbox_exec() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=(--env --env-file --fd)
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options -1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    '--env')
        return
        ;;
    '--env-file')
        return
        ;;
    '--fd')
        return
        ;;
    esac
}

_lockbox_git-credential() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_docker-credential() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=(--store --postgres-url-file --profile --vault --key-file --passphrase-fd --tpm-pin-fd)
    __lockbox_offer_flags_options 1

    # Offer option value completions
    case "${prev}" in
    '--store')
        __lockbox_add_completions -W 'auto'$'\n''secret-service'$'\n''file'$'\n''postgres'
        return
        ;;
    '--postgres-url-file')
        __lockbox_add_completions -f
        return
        ;;
    '--profile')
        return
        ;;
    '--vault')
        __lockbox_add_completions -f
        return
        ;;
    '--key-file')
        __lockbox_add_completions -f
        return
        ;;
    '--passphrase-fd')
        return
        ;;
    '--tpm-pin-fd')
        return
        ;;
    esac
}

_lockbox_exit-codes() {
    repeating_flags=()
    non_repeating_flags=(--version -h --help)
    repeating_options=()
    non_repeating_options=()
    __lockbox_offer_flags_options 0
}

_lockbox_help() {
    repeating_flags=()
    non_repeating_flags=(--version)
    repeating_options=()
    non_repeating_options=()
    __lockbox_offer_flags_options -1
}

complete -o filenames -F _lockbox lockbox
