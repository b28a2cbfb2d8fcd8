# SPDX-License-Identifier: LGPL-2.1-or-later
"""examples/: the HTTP executor serves real sandboxed runs, and the Kubernetes manifest is
valid and carries the settings nsbox needs in a pod (checked offline: PyYAML parses it and
the fields are checked here; no Debian package validates against Kubernetes' schema)."""
import json
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

from nsboxtest import HERE, NsboxTestCase

TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(TOP, "examples")
# The Python API: the checkout's python/ (staged runs of the suite have it beside tests/).
PYTHON_API = os.path.join(TOP, "python")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestExecutor(NsboxTestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        env = dict(os.environ, PYTHONPATH=PYTHON_API, EXECUTOR_LISTEN="127.0.0.1",
                   EXECUTOR_PORT=str(cls.port), EXECUTOR_MAX_BODY="4096",
                   EXECUTOR_MAX_CONCURRENT="1")
        cls.server = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "executor",
                                                                    "server.py")],
                                      env=env, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        cls.server.wait(10)

    def post(self, body):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/run", data=data,
                                     method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def test_runs_code_in_a_sandbox(self):
        status, r = self.post({"code": "import os; print(os.getuid(), open('in.txt').read())",
                               "files": {"in.txt": "hello"}, "timeout": 20})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["status"], "exited", r)
        self.assertEqual(r["stdout"], "65534 hello\n", r)

    def test_timeout_is_the_sandboxes(self):
        status, r = self.post({"code": "while True: pass", "timeout": 1})
        self.assertEqual(status, 200, r)
        self.assertEqual(r["status"], "timeout", r)

    def test_bounds(self):
        self.assertEqual(self.post(b"x" * 5000)[0], 413)
        self.assertEqual(self.post({"code": "1", "timeout": 3600})[0], 400)
        self.assertEqual(self.post({"code": "1", "memory": "64g"})[0], 400)
        self.assertEqual(self.post({"code": "1", "shell": "rm -rf /"})[0], 400)
        self.assertEqual(self.post(b"not json")[0], 400)


class TestKubernetesManifest(unittest.TestCase):
    def setUp(self):
        try:
            import yaml
        except ImportError:
            self.skipTest("PyYAML (python3-yaml) is not installed")
        with open(os.path.join(EXAMPLES, "kubernetes", "executor.yaml")) as f:
            self.docs = {d["kind"]: d for d in yaml.safe_load_all(f)}

    def test_deployment_and_service(self):
        self.assertEqual(set(self.docs), {"Deployment", "Service"})
        dep, svc = self.docs["Deployment"], self.docs["Service"]
        self.assertEqual(dep["apiVersion"], "apps/v1")
        self.assertEqual(svc["apiVersion"], "v1")
        labels = dep["spec"]["template"]["metadata"]["labels"]
        self.assertLessEqual(dep["spec"]["selector"]["matchLabels"].items(), labels.items())
        self.assertLessEqual(svc["spec"]["selector"].items(), labels.items())
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        self.assertEqual(svc["spec"]["ports"][0]["targetPort"], "http")
        self.assertEqual(ports["http"], 8080)

    def test_the_settings_nsbox_doctor_names(self):
        pod = self.docs["Deployment"]["spec"]["template"]["spec"]
        self.assertIs(pod["hostUsers"], False)
        (container,) = pod["containers"]
        sc = container["securityContext"]
        self.assertEqual(sc["procMount"], "Unmasked")
        self.assertEqual(sc["seccompProfile"]["type"], "Localhost")
        self.assertEqual(os.path.basename(sc["seccompProfile"]["localhostProfile"]),
                         "seccomp-nsbox.json")
        self.assertTrue(os.path.exists(os.path.join(EXAMPLES, "seccomp-nsbox.json")))
        # The registry (nsbox ps/kill) on a writable volume under a read-only root.
        env = {e["name"]: e["value"] for e in container["env"]}
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertIn(env["XDG_RUNTIME_DIR"], mounts)


if __name__ == "__main__":
    unittest.main()
