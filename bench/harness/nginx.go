package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// NginxPath returns the nginx binary, or an error saying how to install it.
func NginxPath() (string, error) {
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("nginx not installed: apt-get install -y nginx-light")
}

// StartNginx writes a minimal reverse-proxy config under dir/nginx and runs
// nginx in the foreground (daemon off, one worker, keep-alive to the
// upstream, no access log): the reference proxy of the load bench.
func StartNginx(dir, cpus, listen, upstream string) (*Process, error) {
	return startNginx(dir, "nginx", cpus, listen, "", upstream)
}

// startNginx runs nginx with one server block on listen: proxying to
// upstream when location is empty, else with location as its body.
func startNginx(dir, name, cpus, listen, location, upstream string) (*Process, error) {
	bin, err := NginxPath()
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(prefix, "logs"), 0o755); err != nil {
		return nil, err
	}
	upstreamBlock := ""
	if location == "" {
		upstreamBlock = "upstream up { server " + upstream + "; keepalive 256; }"
		location = `location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Real-IP $remote_addr;
        }`
	}
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
master_process on;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log warn;
events { worker_connections 4096; multi_accept on; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    keepalive_requests 1000000;
    %[3]s
    server {
        listen %[2]s reuseport;
        %[4]s
    }
}
`, prefix, listen, upstreamBlock, location)
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return Start(dir, name, cpus, nil, bin, "-p", prefix, "-c", path, "-e", filepath.Join(prefix, "logs", "error.log"))
}

// InstallTools runs scripts/bench-deps.sh (from the working directory,
// the repository root under `go run ./bench/cmd/...`) when wrk or nginx
// is missing: issue 5 asks for nginx "installed from the distribution's
// packages when missing". The script never fails the bench: without root
// or a package mirror it says what is missing and the bench falls back.
// A missing script (run from elsewhere) is a no-op.
func InstallTools() {
	if _, err := NginxPath(); err == nil && WrkPath() != "" {
		return
	}
	script := filepath.Join("scripts", "bench-deps.sh")
	if _, err := os.Stat(script); err != nil {
		return
	}
	cmd := exec.Command("bash", script)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	_ = cmd.Run()
}
