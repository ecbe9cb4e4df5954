// jit_names.sh's workload: a hot JS function V8 compiles to machine code,
// which only /tmp/perf-<pid>.map (node --perf-basic-prof) can name.
function hotLoopFunction(n) {
	let x = 0;
	for (let i = 0; i < n; i++)
		x = (x * 31 + i) % 1000003;
	return x;
}
function driveTheWork(secs) {
	const end = Date.now() + secs * 1000;
	let s = 0;
	while (Date.now() < end)
		s += hotLoopFunction(100000);
	return s;
}
console.log(driveTheWork(parseFloat(process.argv[2] || "5")));
