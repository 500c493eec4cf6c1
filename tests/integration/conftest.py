"""Real servers for the integration tests: Redis, PostgreSQL, gunicorn and a Celery worker.

Everything is started here as a subprocess on a free loopback port and stopped at the end;
nothing is left running and no config file is read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from .servers import free_port, port_open, stop, wait_for

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def redis_url():
    exe = shutil.which("redis-server")
    assert exe, "redis-server is not installed (Debian package redis-server)"
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: port_open(port), 20, "redis-server")
        yield f"redis://127.0.0.1:{port}"
    finally:
        stop(proc)


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb refuses to run as root: use the postgres account.
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _pg(name: str) -> str:
    path = PG_BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


@dataclass
class PgCluster:
    """A throwaway PostgreSQL cluster on 127.0.0.1 and a free port (trust auth)."""

    base: Path
    port: int

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/dra_web"

    def ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres([_pg("pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            capture_output=True,
        )

    def start(self) -> None:
        self.ctl(
            "-l",
            str(self.base / "postgres.log"),
            "-w",
            "-o",
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.base / 'sock'} -c fsync=off",
            "start",
        )

    def restart(self) -> None:
        """Stop (fast: open connections are terminated) and start again."""
        self.ctl("-m", "fast", "-w", "stop")
        self.start()

    def stop(self) -> None:
        subprocess.run(
            _as_postgres([_pg("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(self.base, ignore_errors=True)


def start_postgres() -> PgCluster:
    base = Path(tempfile.mkdtemp(prefix="dra-web-pg-"))
    sock = base / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        base.chmod(0o700)
    cluster = PgCluster(base, free_port())
    subprocess.run(
        _as_postgres([_pg("initdb"), "--auth=trust", "-U", "postgres", "-D", str(cluster.data)]),
        check=True,
        capture_output=True,
    )
    cluster.start()
    try:
        subprocess.run(
            [_pg("createdb"), "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres"]
            + ["dra_web"],
            check=True,
            capture_output=True,
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="session")
def postgres_url():
    cluster = start_postgres()
    try:
        yield cluster.url
    finally:
        cluster.stop()


@dataclass
class Stack:
    """gunicorn + migrated database + a user with a token; workers started per test."""

    url: str
    token: str
    env: dict[str, str]
    workdir: Path
    workers: list[subprocess.Popen] = field(default_factory=list)

    def session(self) -> requests.Session:
        s = requests.Session()
        s.headers["Authorization"] = f"Token {self.token}"
        return s

    def start_worker(
        self, name: str, *, beat: bool = False, concurrency: int = 1, **env: str
    ) -> subprocess.Popen:
        """A Celery worker; with ``beat``, Celery beat embedded in it as in production (the
        periodic reaper of runs whose worker was lost, every DRA_WEB_REAP_INTERVAL_SECONDS)."""
        log = self.workdir / f"worker-{name}.log"
        beat_args = ["-B", f"--schedule={self.workdir / f'beat-{name}'}"] if beat else []
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "celery"),
                "-A",
                "dra_web",
                "worker",
                "--loglevel=INFO",
                f"--concurrency={concurrency}",
                "--pool=prefork",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"{name}@%h",
                *beat_args,
            ],
            cwd=ROOT,
            env={**self.env, **env},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc.log_path = log
        self.workers.append(proc)
        wait_for(
            lambda: b" ready." in log.read_bytes() or proc.poll() is not None,
            60,
            f"celery worker {name}",
        )
        assert proc.poll() is None, log.read_text()
        return proc

    def worker_log(self, proc: subprocess.Popen) -> str:
        return proc.log_path.read_text(errors="replace")

    def wait_run(self, run_id: int, statuses=("succeeded", "failed"), timeout=90.0) -> dict:
        s = self.session()

        def done():
            body = s.get(f"{self.url}/api/runs/{run_id}/", timeout=10).json()
            return body if body["status"] in statuses else None

        return wait_for(done, timeout, f"run {run_id} to be {'/'.join(statuses)}", 0.25)


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextlib.contextmanager
def make_stack(
    workdir: Path, db_url: str, broker_url: str, *, flush: bool = False, **extra_env: str
):
    """Migrated database, collected static files, gunicorn, and a user with a token."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DRA_WEB_"))},
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "dra_web.settings",
        "DATABASE_URL": db_url,
        "REDIS_URL": broker_url,
        "SECRET_KEY": "integration-test-secret-key-not-for-production-" + "x7Qp2Lm9Zr4Tb8Wc",
        "DEBUG": "false",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DRA_WEB_RUN_HEARTBEAT_SECONDS": "0.5",
        "DRA_WEB_RUN_STALE_SECONDS": "4",
        "DRA_WEB_REAP_INTERVAL_SECONDS": "1",
        "DRA_WEB_PROGRESS_INTERVAL_SECONDS": "0.2",
        # As in docker-compose: no DEBUG, Django serves collectstatic's output itself.
        "DRA_WEB_SERVE_STATIC": "true",
        "STATIC_ROOT": str(workdir / "static"),
        **extra_env,
    }
    _manage(env, "migrate", "--noinput")
    if flush:
        # Flush what an earlier module left so that each module starts from an empty database.
        _manage(env, "flush", "--noinput")
    _manage(env, "collectstatic", "--noinput", "-v", "0")
    token = _manage(env, "create_token", "alice", "--create-user").strip()
    port = free_port()
    web_log = workdir / "gunicorn.log"
    web = subprocess.Popen(
        [
            str(VENV_BIN / "gunicorn"),
            "dra_web.wsgi:application",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "2",
            "--timeout",
            "120",
        ],
        cwd=ROOT,
        env=env,
        stdout=web_log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stack = Stack(url=f"http://127.0.0.1:{port}", token=token, env=env, workdir=workdir)
    try:
        wait_for(lambda: port_open(port) or web.poll() is not None, 30, "gunicorn")
        assert web.poll() is None, web_log.read_text()
        yield stack
    finally:
        for proc in stack.workers:
            stop(proc)
        stop(web)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request, redis_url, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(f"stack-{request.param}")
    if request.param == "postgresql":
        db_url = request.getfixturevalue("postgres_url")
    else:
        db_url = f"sqlite:///{workdir / 'dra_web.sqlite3'}"
    # One Redis database per stack: a broker is never shared by two databases.
    with make_stack(
        workdir,
        db_url,
        f"{redis_url}/{request.param_index}",
        flush=request.param == "postgresql",
    ) as stack:
        yield stack
