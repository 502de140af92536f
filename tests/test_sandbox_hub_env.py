"""The grading kernel's environment keeps no token a hub puts in the grader's server (JupyterHub
sets JUPYTERHUB_API_TOKEN and its old name JPY_API_TOKEN; tests/hub found the second one in a
graded notebook's output)."""

from nboracle.grader.sandbox import _kernel_env


def test_no_hub_token_reaches_the_kernel():
    env = _kernel_env({"PATH": "/usr/bin", "JPY_API_TOKEN": "secret", "JUPYTERHUB_API_TOKEN": "secret",
                       "JPY_PARENT_PID": "1", "JPY_SESSION_NAME": "x.ipynb", "LC_ALL": "C.UTF-8"})
    assert "secret" not in env.values()
    assert env["JPY_PARENT_PID"] == "1" and env["JPY_SESSION_NAME"] == "x.ipynb" and env["LC_ALL"] == "C.UTF-8"
