# hostccl: source this file (`source <prefix>/set_env.sh`), as CANN's set_env.sh, to build and run
# CANN programs against this installation: it sets ASCEND_HOME_PATH (and ASCEND_TOOLKIT_HOME) to the
# directory it is in, and puts lib64/ on LD_LIBRARY_PATH and bin/ on PATH. It finds its own
# directory, so the tree can be installed or moved anywhere. bash and zsh; other shells: set
# HOSTCCL_HOME to the installation directory before sourcing.

if [ -n "${BASH_VERSION:-}" ]; then
    _hostccl_self="${BASH_SOURCE[0]}"
elif [ -n "${ZSH_VERSION:-}" ]; then
    eval '_hostccl_self="${(%):-%x}"'
else
    _hostccl_self="${HOSTCCL_HOME:+${HOSTCCL_HOME}/set_env.sh}"
fi

if [ -z "${_hostccl_self}" ]; then
    echo "set_env.sh: cannot tell where this file is in this shell; set HOSTCCL_HOME to the hostccl installation directory and source it again" >&2
else
    _hostccl_home="$(cd "$(dirname "${_hostccl_self}")" && pwd -P)"

    # Prepend $2 to the variable named $1 unless it is already in it.
    _hostccl_prepend() {
        eval "_hostccl_value=\"\${$1:-}\""
        case ":${_hostccl_value}:" in
            *":$2:"*) ;;
            *) eval "export $1=\"$2\${_hostccl_value:+:\${_hostccl_value}}\"" ;;
        esac
        unset _hostccl_value
    }

    export ASCEND_HOME_PATH="${_hostccl_home}"
    export ASCEND_TOOLKIT_HOME="${_hostccl_home}"
    _hostccl_prepend LD_LIBRARY_PATH "${_hostccl_home}/lib64"
    _hostccl_prepend PATH "${_hostccl_home}/bin"
    unset -f _hostccl_prepend
    unset _hostccl_home
fi
unset _hostccl_self
