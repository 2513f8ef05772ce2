#!/usr/bin/env bash
# The GitHub Action in action.yml: check the inputs, install mlcopilot, load the catalog, run
# one `mlcopilot scan` writing every report asked for, set the step's outputs, and exit with
# the scan's exit code (1: the gate failed).
#
# It reads the action's inputs from INPUT_* variables, which action.yml sets one by one (a
# composite action does not export its inputs itself):
#   INPUT_CATALOG     a DataHub metadata file (JSON MCPs/MCEs) or a folder of them, loaded
#                     in name order into a fresh embedded catalog; or datahub (the server in
#                     DATAHUB_GMS_URL, token DATAHUB_GMS_TOKEN), mcp (the same, through
#                     DataHub's MCP server), or a --catalog spec: lite:PATH, datahub:URL, mcp:URL
#   INPUT_MODEL       models to scan, by name or urn, one a line or comma-separated (commas
#                     inside an urn's parentheses stay in it); empty: every model
#   INPUT_FAIL_ON     critical, high, medium or low: the gate; none (or empty): report only
#   INPUT_FORMATS     comma-separated: github (annotations in the log, and the job summary),
#                     sarif, junit, json, markdown, html (each a file in INPUT_OUTPUT_DIR)
#   INPUT_OUTPUT_DIR  where the report files go (relative: to the workspace)
#   INPUT_ARGS        more `mlcopilot scan` options, split on whitespace (--now ..., --no-write-back)
#   INPUT_INSTALL     true: install mlcopilot into a fresh venv; false: use the mlcopilot on PATH
#   INPUT_VERSION     what to pip install (a pip requirement); empty: the action's own checkout
# and, from the runner: GITHUB_ACTION_PATH, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY (the scan
# appends to it), GITHUB_WORKSPACE, RUNNER_TEMP; MLCOPILOT_ACTION_PYTHON is the interpreter
# the venv is made with (action.yml passes setup-python's; default python3).
#
# Bad input is one ::error:: line and exit 2, before anything is installed or written.
# Needs bash 4 or later (Linux runners; macOS's /bin/bash is 3.2).
set -euo pipefail

REPORT_FILES=(sarif:mlcopilot.sarif junit:mlcopilot-junit.xml json:mlcopilot.json
  markdown:mlcopilot.md html:mlcopilot.html)
FORMATS="github sarif junit json markdown html"
SEVERITIES="critical high medium low none"

# A workflow command's message, escaped as @actions/core escapes it: input text cannot start a
# command of its own.
escape_data() {
  local text=$1
  text=${text//'%'/%25}
  text=${text//$'\r'/%0D}
  text=${text//$'\n'/%0A}
  printf '%s' "$text"
}

fail() {
  printf '::error::%s\n' "$(escape_data "mlcopilot action: $1")"
  finish 2
}

trim() {
  local text=$1
  text=${text#"${text%%[![:space:]]*}"}
  text=${text%"${text##*[![:space:]]}"}
  printf '%s' "$text"
}

# One output, in the multiline form (key<<DELIMITER), so no value can set another key.
set_output() {
  local key=$1 value=$2 delimiter
  [[ -n ${GITHUB_OUTPUT:-} ]] || return 0
  delimiter="ghadelimiter_$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  if [[ $value == *"$delimiter"* ]]; then
    printf '::error::%s\n' "mlcopilot action: output $key holds its delimiter" >&2
    return 1
  fi
  printf '%s<<%s\n%s\n%s\n' "$key" "$delimiter" "$value" "$delimiter" >>"$GITHUB_OUTPUT"
}

# Every output, every time (a report not written is empty), then exit with CODE.
finish() {
  local code=$1 pair name file
  set_output exit-code "$code"
  set_output report-dir "${output_dir:-}"
  for pair in "${REPORT_FILES[@]}"; do
    name=${pair%%:*}
    file=${output_dir:-}/${pair#*:}
    [[ -n ${output_dir:-} && -f $file ]] || file=
    set_output "$name-file" "$file"
  done
  exit "$code"
}

# The models: lines, and commas outside parentheses (an urn's own commas stay in it).
split_models() {
  local text=$1 item="" depth=0 char i
  for ((i = 0; i < ${#text}; i++)); do
    char=${text:i:1}
    case $char in
      '(')
        depth=$((depth + 1))
        item+=$char
        ;;
      ')')
        depth=$((depth - 1))
        item+=$char
        ;;
      $'\n' | $'\r')
        add_model "$item"
        item=""
        depth=0
        ;;
      ,)
        if ((depth > 0)); then
          item+=$char
        else
          add_model "$item"
          item=""
        fi
        ;;
      *) item+=$char ;;
    esac
  done
  add_model "$item"
}

add_model() {
  local name
  name=$(trim "$1")
  [[ -z $name ]] || models+=("$name")
}

output_dir=""
cd "${GITHUB_WORKSPACE:-.}"

# --- the inputs, all checked before anything is installed or written ---
install=$(trim "${INPUT_INSTALL:-true}")
case ${install,,} in
  true) install=true ;;
  false) install=false ;; # as action.yml's `inputs.install != 'false'` reads it
  *) fail "input install: '$install' is not true or false" ;;
esac

fail_on=$(trim "${INPUT_FAIL_ON:-}")
fail_on=${fail_on,,}
[[ -n $fail_on ]] || fail_on=none
[[ " $SEVERITIES " == *" $fail_on "* ]] ||
  fail "input fail-on: '$fail_on' is not one of ${SEVERITIES// /, }"

formats=()
given=()
IFS=$',\n' read -r -d '' -a given <<<"${INPUT_FORMATS:-}" || true
for each in "${given[@]}"; do
  each=$(trim "$each")
  [[ -n $each ]] || continue
  [[ " $FORMATS " == *" $each "* ]] ||
    fail "input formats: unknown format '$each' (expected ${FORMATS// /, })"
  [[ " ${formats[*]} " != *" $each "* ]] || fail "input formats: '$each' is given twice"
  formats+=("$each")
done
((${#formats[@]})) || fail "input formats: empty (give one or more of ${FORMATS// /, })"

output_dir=$(trim "${INPUT_OUTPUT_DIR:-}")
[[ -n $output_dir ]] || fail "input output-dir: empty"

models=()
split_models "${INPUT_MODEL:-}"

extra=()
read -r -d '' -a extra <<<"${INPUT_ARGS:-}" || true

version=$(trim "${INPUT_VERSION:-}")
[[ $version != -* ]] || fail "input version: '$version' is an option, not a pip requirement"
if [[ $install == true && -z $version ]]; then
  [[ -n ${GITHUB_ACTION_PATH:-} ]] ||
    fail "input version: empty, and no GITHUB_ACTION_PATH to install the action's own copy from"
  version=$GITHUB_ACTION_PATH
elif [[ $install == false ]]; then
  mlcopilot=$(command -v mlcopilot) || fail "input install: false, but there is no mlcopilot on PATH"
fi

catalog=$(trim "${INPUT_CATALOG:-}")
files=()
case $catalog in
  "") fail "input catalog: empty (a metadata file or folder, datahub, mcp, or lite:PATH)" ;;
  datahub) spec="datahub:" ;;
  mcp)
    [[ -n ${DATAHUB_GMS_URL:-} ]] ||
      fail "input catalog: mcp needs DATAHUB_GMS_URL (and DATAHUB_GMS_TOKEN) in the step's env"
    spec="mcp:$DATAHUB_GMS_URL"
    ;;
  lite:* | datahub:* | mcp:*) spec=$catalog ;;
  *)
    if [[ -d $catalog ]]; then
      shopt -s nullglob
      files=("$catalog"/*.json)
      shopt -u nullglob
      ((${#files[@]})) || fail "input catalog: no .json metadata file in the folder '$catalog'"
      # Name order, as the files are meant to be read (01_..., 02_...), whatever the locale.
      mapfile -t files < <(printf '%s\n' "${files[@]}" | LC_ALL=C sort)
    elif [[ -f $catalog ]]; then
      files=("$catalog")
    else
      fail "input catalog: '$catalog' is no file or folder (nor datahub, mcp, lite:PATH, datahub:URL, mcp:URL)"
    fi
    spec=lite # an embedded catalog of this run, made below
    ;;
esac

work=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/mlcopilot.XXXXXX")
# The incidents go in this run's home unless the workflow keeps them (MLCOPILOT_HOME, or
# MLCOPILOT_STATE_URL for a database that outlives the job, as --fail-on-new needs).
export MLCOPILOT_HOME=${MLCOPILOT_HOME:-$work/home}
[[ $spec != lite ]] || spec="lite:$work/catalog.db"

# --- install ---
if [[ $install == true ]]; then
  echo "::group::Installing mlcopilot ($version)"
  code=0
  {
    "${MLCOPILOT_ACTION_PYTHON:-python3}" -m venv "$work/venv" &&
      "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --progress-bar off "$version"
  } || code=$?
  echo "::endgroup::"
  if ((code)); then
    printf '::error::%s\n' "$(escape_data "mlcopilot action: installing $version failed (exit $code); pip's error is above")"
    finish 3
  fi
  mlcopilot=$work/venv/bin/mlcopilot
fi
"$mlcopilot" --version

# --- the catalog ---
if ((${#files[@]})); then
  echo "::group::Loading ${#files[@]} metadata file(s) into an embedded catalog"
  code=0
  "$mlcopilot" catalog load --catalog "$spec" "${files[@]}" || code=$?
  echo "::endgroup::"
  if ((code)); then
    printf '::error::%s\n' "mlcopilot action: loading the catalog failed (exit $code); its error is above"
    finish "$code"
  fi
fi

# SARIF results need a file of the repository to show at: the metadata file or folder the
# catalog was loaded from, unless the step's env names one (MLCOPILOT_SARIF_LOCATION).
if ((${#files[@]})) && [[ -z ${MLCOPILOT_SARIF_LOCATION:-} ]]; then
  export MLCOPILOT_SARIF_LOCATION=$catalog
fi

# --- the gate: one scan, every report from it ---
scan=("$mlcopilot" scan --catalog "$spec")
for model in "${models[@]}"; do
  scan+=(--model "$model")
done
[[ $fail_on == none ]] || scan+=(--fail-on "$fail_on")
for each in "${formats[@]}"; do
  if [[ $each == github ]]; then
    scan+=(--format github --output -) # the annotations go to the log
    continue
  fi
  for pair in "${REPORT_FILES[@]}"; do
    [[ ${pair%%:*} != "$each" ]] || scan+=(--format "$each" --output "$output_dir/${pair#*:}")
  done
done
scan+=("${extra[@]}")

code=0
"${scan[@]}" || code=$?
finish "$code"
