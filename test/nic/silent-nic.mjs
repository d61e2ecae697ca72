// A NIC thread that never answers: it neither reports its link open nor fails (open-deadline.test.ts).
setInterval(() => {}, 1000);
