"""JupyterHub 5 for the course on one machine: `make hub` (instructor/hub/) starts it as root.

* PAM logs in the hub's system accounts, made from the roster (STATE/roster.csv; the sample
  class hub/roster.csv); only they are allowed; the hub's admins are named apart (`admin add`),
  no course's instructor is one: each lecturer reaches her own course's formgrader only.
* LocalProcessSpawner: each user's server runs as that user, from the course's environment,
  with JupyterLab, the Assignments panel and Validate (no formgrader in users' own servers).
* The formgrader is a managed hub service (/services/formgrader/): a single-user server run by
  the account `grader-attention` in the course root it owns, which the group
  `formgrade-attention-transformers` (instructors and assistants) may open: the role below grants
  `access:services!service=formgrader` and nothing else (the assistant is not an admin).
* Another course (`python -m instructor.hub course add`) gets the same: its service
  /services/formgrader-<id>/ run by `grader-<id>`, its groups and role, on the next port. With
  more than one course nbgrader asks the hub which courses a user is in (its groups).
* A course in another language (its config's c.MessageCatalog.language, which `course add`
  records: the Vietnamese edition's `vi`): its students' servers get COURSE_LANGUAGE, so that the
  visible tests and Validate speak it as its feedback does; a person whose courses differ in
  language gets English (H.server_language, by their groups when their server starts).
"""

import os
import sys
from pathlib import Path

import jupyterhub.app

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from nboracle.classroom import pipeline as P  # noqa: E402
from nboracle.grader.nbgrader_ext import JUPYTER_DATA  # noqa: E402

from course.language import ENV as LANGUAGE_ENV  # noqa: E402
from instructor import hub as H  # noqa: E402

c = get_config()  # noqa: F821


# JupyterHub 5 waits for a managed service 10 times 1 s, then exits ("Cannot connect to formgrader
# service managed"); the formgrader's Lab takes longer on a loaded machine (measured: 11 s and more
# with a load of 14 on 2 cores). Each wait here lasts up to 12 s instead (2 minutes in all).
class PatientServer(jupyterhub.app.Server):
    async def wait_up(self, timeout=10, **kw):
        return await super().wait_up(timeout=max(timeout, 12), **kw)


jupyterhub.app.Server = PatientServer
layout = H.Layout(Path(os.environ.get("COURSE_HUB_STATE", H.DEFAULT_STATE)))
ip = os.environ.get("COURSE_HUB_IP", "127.0.0.1")
port = int(os.environ.get("COURSE_HUB_PORT", "8000"))

# the proxy (hub/node_modules, npm ci), its API, the hub and the service on four ports
c.JupyterHub.ip = ip
c.JupyterHub.port = port
c.ConfigurableHTTPProxy.command = [str(H.proxy_bin())]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port + 1}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = port + 2
service_port = port + 3  # the first course's formgrader; another course's on the ports after it

# state: never in the repository's tracked files
c.JupyterHub.db_url = f"sqlite:///{layout.hub / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(layout.hub / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(layout.hub / "jupyterhub-process.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every user's server

c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
# The roster (STATE/roster.csv, instructor/roster.py) says who may log in, who is an admin, who
# grades. `python -m instructor.hub roster import|drop` changes it while the hub runs, through the
# hub's REST API with the roster service's token (no restart: no one's server stops); since
# allowed_users is set, users added through the API may log in too (allow_existing_users).
courses = layout.courses()  # this course first, then those `course add` recorded
c.Authenticator.allowed_users = {p.id for p in layout.everyone()}
# the hub's admins: a role of its own (`python -m instructor.hub admin add ID`), never a course's
# instructor: an admin reaches every server, so a lecturer who were one would reach the other courses'
c.Authenticator.admin_users = set(layout.admins())

c.JupyterHub.load_groups = {}
c.JupyterHub.load_roles = [
    {"name": "course-roster", "description": "add and drop the roster's users and group members",
     "scopes": ["admin:users", "admin:servers", "groups", "list:users"], "services": [H.ROSTER_SERVICE]},
]
for course in courses:
    people = layout.people(course)
    c.JupyterHub.load_groups[course.graders_group] = {
        "users": [p.id for p in people if p.role in ("instructor", "ta")]}
    c.JupyterHub.load_groups[course.students_group] = {"users": [p.id for p in people if p.role == "student"]}
    c.JupyterHub.load_roles.append(
        {"name": "course-graders" if course.id == H.COURSE_ID else f"course-graders-{course.id}",
         "description": f"open the formgrader service of {course.id}",
         "scopes": [f"access:services!service={course.service}"], "groups": [course.graders_group]})
if len(courses) > 1:
    # nbgrader's JupyterHubAuthPlugin reads the user's own groups with the server's token: the
    # Assignment List's courses, and fetch and submit only for those
    c.Spawner.server_token_scopes = ["users:activity!user", "access:servers!server", "read:users:groups!user",
                                     "read:users:name!user"]

python = str(Path(sys.executable))
lab_args = ["--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate"]
if os.environ.get("COURSE_HUB_EXPOSE_APP") == "1":  # the browser tests drive Lab's app object
    lab_args.append("--LabApp.expose_app_in_browser=True")

common_env = {
    "PATH": f"{P.BIN}:/usr/local/bin:/usr/bin:/bin",
    "PYTHONPATH": str(REPO),
    "LANG": "C.UTF-8",
}

# JupyterHub also puts the server's token in JPY_API_TOKEN (an old name jupyterhub.singleuser no
# longer reads): drop it, one copy fewer for kernels to find (the grading sandbox drops both).
singleuser = ["/usr/bin/env", "-u", "JPY_API_TOKEN", python, "-m", "jupyterhub.singleuser"]
c.Spawner.cmd = singleuser
c.Spawner.args = lab_args
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 240
# Everyone's nbgrader: the shared exchange and course id (etc/common), the course's own config
# (the repository: Validate runs like the grader), students' Lab without grading tools.
c.Spawner.environment = {
    **common_env,
    "JUPYTER_CONFIG_PATH": os.pathsep.join(map(str, (layout.student_etc, layout.common, REPO))),
    # the Assignment List's due dates: the nboracle-due-dates Lab extension
    "JUPYTER_PATH": str(JUPYTER_DATA),
}
if any(course.language != H.ENGLISH for course in courses):
    # the language of the person's courses (all of them the same), else English (""); read when
    # the server starts, from the groups in force then (a roster import changes them)
    c.Spawner.environment[LANGUAGE_ENV] = lambda spawner: H.server_language(
        courses, {group.name for group in spawner.user.groups})

c.JupyterHub.services = [{"name": H.ROSTER_SERVICE, "api_token": H.roster_token(layout)}]
for number, course in enumerate(courses):
    c.JupyterHub.services.append({
        "name": course.service,
        "display": True,
        "url": f"http://127.0.0.1:{service_port + number}",
        "command": [*singleuser, f"--ServerApp.root_dir={course.root}", *lab_args],
        "user": course.grader,
        "cwd": str(course.root),
        "oauth_no_confirm": True,
        # the course root's nbgrader_config.py is read from the working directory; COURSE_ROOT makes
        # `python -m instructor grade-class|export` in its terminal work on this course root
        "environment": {**H.grader_env(layout, course), "JUPYTERHUB_DEFAULT_URL": "/lab"},
    })
