# One-command workflows. Every target sets up .venv/ first if needed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# No MPLBACKEND here: Lab passes it to every kernel and Agg would hide every plot. The
# headless tools (grading, tests, bench) set Agg themselves (nboracle.classroom.pipeline.tool_env).

# A language edition (docs/TRANSLATING.md): `make lab LANG=vi`, `make check LANG=vi` (EDITION=vi
# too); a locale such as LANG=vi_VN.UTF-8 picks it as well. LANG=vi is no locale: the tools get C.UTF-8.
EDITION ?= $(if $(filter vi vi_% vi.%,$(LANG)),vi)
EDITION_ARGS = $(if $(EDITION),--edition $(EDITION))
LOCALE_FIX = $(if $(filter vi,$(LANG)),LANG=C.UTF-8 )

.PHONY: setup demo test test-slow test-nbgrader test-all test-browser hub hub-stop hub-roster hub-course hub-export hub-backup hub-restore test-hub lab formgrader build release translate autograde feedback export check check-stop grade-class bench lint clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml nbgrader-oracle/pyproject.toml
	@echo "setup: creating $(VENV)/ with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@echo "setup: installing requirements.txt (PyTorch, nbgrader, JupyterLab, ...) and this course's two packages, editable; a few minutes on a fresh machine"
	@$(PY) -m pip install --quiet --upgrade pip
	@# setuptools tells every editable install to beware of folders named like the package (an
	@# information-only warning, a screen per package): the two packages here are the folders meant
	@PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install --quiet -r requirements.txt
	@# rfc3987-syntax is an optional extra of jsonschema that costs seconds at every
	@# nbgrader/jupytext start (it builds a grammar on import); nothing here needs it.
	@$(PY) -m pip uninstall --quiet --yes rfc3987-syntax
	@touch $@
	@echo "setup: done, $(VENV)/ is ready"

demo: setup            ## build, release, grade three sample students, print the grade table
	$(PY) -m instructor demo

test: setup            ## lint, then the core test suite on 2 workers (the slow stage: make test-slow; browser: make test-browser)
	$(PY) -m ruff check course instructor tests bench source nbgrader-oracle examples
	$(PY) -m pytest -n 2 --ignore=tests/browser --ignore=tests/hub -m "not slow"

test-slow: setup       ## the slow stage: the class on a Dask cluster with a PostgreSQL gradebook (.ci/install-postgres)
	$(PY) -m pytest -n 0 --ignore=tests/browser --ignore=tests/hub -m slow

test-nbgrader: setup   ## nbgrader 0.9.6's own app tests with the grader switched on: all of them, then autograde and feedback under COURSE_ORACLE=on (tests/conformance/)
	$(PY) tests/conformance/run.py

test-all: test test-slow test-nbgrader test-browser  ## everything .ci/run runs but the hub

test-browser: setup    ## the real-browser suite (headless Chromium against make lab / make formgrader)
	$(PY) -m pytest -n 0 -p no:cacheprovider tests/browser -v -rs

# JupyterHub on this machine (root; docs/JUPYTERHUB.md): the proxy from hub/package-lock.json
HUB_PORT ?= 8000
hub/node_modules/.installed: hub/package.json hub/package-lock.json
	npm ci --prefix hub --no-audit --no-fund --loglevel=error
	touch $@

hub: setup hub/node_modules/.installed   ## JupyterHub for the course on http://127.0.0.1:$(HUB_PORT) (root; ROSTER=class.csv for a new term; Ctrl-C or make hub-stop)
	$(PY) -m instructor.hub start --port $(HUB_PORT) $(if $(BACKGROUND),--background) $(if $(ROSTER),--roster "$(ROSTER)")

hub-roster: setup      ## make hub-roster FILE=class.csv: add or update the hub's accounts and gradebook students (running hub: no restart)
	@test -n "$(FILE)" || { echo "usage: make hub-roster FILE=class.csv"; exit 2; }
	$(PY) -m instructor.hub roster import "$(FILE)"

hub-course: setup      ## make hub-course ID=attention-evening FILE=evening.csv: another course on the hub (restart to start its formgrader)
	@test -n "$(ID)" -a -n "$(FILE)" || { echo "usage: make hub-course ID=course-id FILE=roster.csv [SOURCE=dir] [CONFIG=file]"; exit 2; }
	$(PY) -m instructor.hub course add "$(ID)" --roster "$(FILE)" $(if $(SOURCE),--source "$(SOURCE)") $(if $(CONFIG),--config "$(CONFIG)")

hub-export: setup      ## the hub's grades for the university's gradebook: make hub-export [TO=grades-lms.csv] [LAYOUT=canvas]
	$(PY) -m instructor.hub export --to "$(or $(TO),grades-lms.csv)" --layout $(or $(LAYOUT),long)

hub-backup: setup      ## one archive of the hub's term (roster, gradebook, submissions, exchange) in STATE/backups/
	$(PY) -m instructor.hub backup

hub-restore: setup     ## make hub-restore FROM=term.tar.gz [HUB_STATE=/new/state]
	@test -n "$(FROM)" || { echo "usage: make hub-restore FROM=term-....tar.gz"; exit 2; }
	$(PY) -m instructor.hub restore "$(FROM)"

hub-stop:              ## stop make hub: the hub, the proxy, every server, the formgrader service (PURGE=1: then remove its accounts and state folder)
	$(PY) -m instructor.hub stop $(if $(PURGE),--purge)

test-hub: setup hub/node_modules/.installed   ## the term on a real hub in headless Chromium (root; bash .ci/install-browser)
	COURSE_HUB_TESTS=1 $(PY) -m pytest -n 0 -p no:cacheprovider tests/hub -v -rs

lab: setup             ## your workspace (copies of the released notebooks) in JupyterLab; LANG=vi: the Vietnamese edition
	$(LOCALE_FIX)$(PY) -m instructor lab $(EDITION_ARGS)

formgrader: setup      ## the course root in JupyterLab with nbgrader's formgrader (instructors)
	$(PY) -m instructor formgrader

build: setup           ## sync every jupytext pair under source/
	$(PY) -m instructor build

release: setup         ## regenerate release/ from source/
	$(PY) -m instructor release

translate: setup       ## update the catalogs i18n/<lang>/*.po, release the Vietnamese edition (editions/vi/), say what is left to translate
	$(LOCALE_FIX)$(PY) -m instructor translate --lang $(or $(EDITION),vi)

autograde: setup       ## autograde everything in submitted/
	$(PY) -m instructor autograde

feedback: setup        ## feedback HTML for autograded submissions
	$(PY) -m instructor feedback

export: setup          ## grades to grades.csv
	$(PY) -m instructor export --to grades.csv

check: setup           ## grade your workspace (one line per started chapter), or one file: make check NB=path/to/two_keys.ipynb; LANG=vi: the Vietnamese workspace
	$(LOCALE_FIX)$(PY) -m instructor check $(EDITION_ARGS) $(if $(NB),"$(NB)")

check-stop: setup      ## end the check server that make check leaves warm for the next checks (it ends by itself after 15 idle minutes)
	$(PY) -m instructor check --stop-server

grade-class: setup     ## make grade-class A=01_two_keys FROM=class.zip JOBS=2 [CLUSTER=tcp://scheduler:8786]
	@test -n "$(A)" || { echo "usage: make grade-class A=<assignment> [FROM=folder-or-zip] [JOBS=2] [CLUSTER=address|local:N]"; exit 2; }
	$(PY) -m instructor grade-class "$(A)" $(if $(FROM),--from "$(FROM)") --jobs $(or $(JOBS),2) $(if $(CLUSTER),--cluster "$(CLUSTER)")

bench: setup           ## speed figures, measured side by side (BENCH_ARGS="--only cluster --cluster-students 40")
	$(PY) bench/benchmark.py $(BENCH_ARGS)

lint: setup
	$(PY) -m ruff check course instructor tests bench source nbgrader-oracle examples

clean:                 ## remove generated grading state (never source/, release/ or submitted/)
	rm -rf autograded/*/ autograded/.batch-state.json feedback/ downloaded/ report-*.txt mistakes/ gradebook.db grades.csv .pytest_cache .exchange/
