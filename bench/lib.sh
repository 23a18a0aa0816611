# lib.sh: measuring helpers that posix-vs-nginx.sh and native-vs-posix.sh
# source. Jiffies convert to time with $(getconf CLK_TCK).

# busy: the machine's busy jiffies so far (/proc/stat: user, nice, system,
# irq, softirq; not idle, iowait or steal).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat; }

# proccpu PID: utime+stime jiffies of PID and its child processes (nginx
# workers), a figure that other work on the machine does not inflate.
proccpu() {
	local total=0 p
	for p in "$1" $(pgrep -P "$1" || true); do
		total=$((total + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$total"
}

# median: the median of the numbers on stdin (separated by spaces or newlines).
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
